"""One of Flux's controllers as a process on this machine, out of cluster, against a kubeconfig.

Flux's controllers have no ``--kubeconfig`` flag: controller-runtime reads ``KUBECONFIG`` (set here), and
``RUNTIME_NAMESPACE`` names their own namespace. Every controller gets free loopback ports for metrics and
health (their defaults ``:8080``/``:9440`` clash when several run), JSON logs into ``log_path``, and is
ready when ``/readyz`` answers 200. ``stop()`` sends SIGTERM, then SIGKILL after a grace period; the child
also gets SIGKILL should the process that started it die (``PR_SET_PDEATHSIG``), so nothing outlives its owner.

    proc = FluxProcess(binary=assets.binary("source-controller"), kubeconfig=..., log_path=...,
                       args=["--storage-path=/tmp/x", "--storage-addr=127.0.0.1:PORT", ...])
    await proc.start()
    ...
    await proc.stop()
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from tests.processes import die_with_parent, free_port, read_log, terminate, wait_ready


class FluxProcessError(RuntimeError):
    """A Flux controller did not start; the message carries its log's tail."""


async def communicate(argv: Sequence[str], *, within: float, stdin: bytes | None = None,
                      env: Mapping[str, str] | None = None, cwd: Path | None = None) -> tuple[int, bytes, bytes]:
    """Run ``argv`` to its end: (exit code, stdout, stderr); killed and ``TimeoutError`` after ``within`` s."""
    proc = await asyncio.create_subprocess_exec(
        *argv, cwd=cwd, env=None if env is None else dict(env), stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        stdin=asyncio.subprocess.PIPE if stdin is not None else asyncio.subprocess.DEVNULL)
    try:
        out, err = await asyncio.wait_for(proc.communicate(stdin), within)
    except TimeoutError:
        proc.kill()
        await proc.wait()
        raise TimeoutError(f"{' '.join(argv)}: no exit within {within}s") from None
    assert proc.returncode is not None
    return proc.returncode, out, err


@dataclass
class FluxProcess:
    binary: Path
    kubeconfig: Path | str
    log_path: Path
    args: Sequence[str] = ()
    runtime_namespace: str = "flux-system"
    env: dict[str, str] = field(default_factory=dict)
    metrics_port: int = field(default_factory=free_port)
    health_port: int = field(default_factory=free_port)
    urls: dict[str, str] = field(default_factory=dict)  # what it serves besides metrics/health, by name
    _proc: asyncio.subprocess.Process | None = None

    @property
    def name(self) -> str:
        return self.binary.name

    @property
    def metrics_url(self) -> str:
        return f"http://127.0.0.1:{self.metrics_port}/metrics"

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    def argv(self) -> list[str]:
        return [str(self.binary), f"--metrics-addr=127.0.0.1:{self.metrics_port}",
                f"--health-addr=127.0.0.1:{self.health_port}", "--log-encoding=json", *self.args]

    def logs(self) -> str:
        return read_log(self.log_path)

    async def start(self, *, ready_within: float = 60.0) -> None:
        env = {k: v for k, v in os.environ.items() if not k.startswith("KUBERNETES_")}
        env.update(KUBECONFIG=str(self.kubeconfig), RUNTIME_NAMESPACE=self.runtime_namespace, **self.env)
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        with self.log_path.open("ab") as log:
            self._proc = await asyncio.create_subprocess_exec(
                *self.argv(), stdin=asyncio.subprocess.DEVNULL, stdout=log, stderr=log, env=env,
                preexec_fn=die_with_parent)
        failure = await wait_ready(self._proc, f"http://127.0.0.1:{self.health_port}/readyz", within=ready_within,
                                   name=self.name)
        if not failure:
            return
        await self.stop()
        tail = "\n".join(self.logs().splitlines()[-40:])
        raise FluxProcessError(f"{failure}\n--- {self.log_path} ---\n{tail}")

    async def stop(self, *, grace: float = 20.0) -> int | None:
        proc = self._proc
        if proc is None:
            return None
        await terminate(proc, grace=grace)
        return proc.returncode
