"""A real Kubernetes control plane on loopback, from binaries in a directory (``KUBE_ASSETS``).

As controller-runtime's envtest takes ``KUBEBUILDER_ASSETS``, this takes a directory holding
``etcd``, ``kube-apiserver`` and, optionally, ``kube-controller-manager`` (in real life from Kubernetes'
and etcd's releases) and starts them with what a real cluster has:

- etcd on two free loopback ports, its data in the work directory (``--unsafe-no-fsync``: a test
  cluster trades durability for speed, as envtest does);
- kube-apiserver on ``127.0.0.1`` with TLS, RBAC (``--authorization-mode=Node,RBAC``), API priority and
  fairness (the default), a service-account issuer and signing key (TokenRequest works), the default
  admission plugins, and an audit log (``Metadata`` level, every request: ``audit.jsonl`` — the bench
  counts requests per user and verb from it);
- kube-controller-manager with its own client certificate, the service-account private key and the CA
  (namespace deletion, garbage collection, ServiceAccounts and their tokens, Deployments' ReplicaSets);
  there is no scheduler and no kubelet, so Pods stay Pending, as in envtest with a controller manager.

``ControlPlane.start()`` returns once ``/readyz`` answers and, with a controller manager, the ``default``
ServiceAccount exists (its controllers run). ``admin_kubeconfig`` authenticates with a static bearer token
of a ``system:masters`` user; ``users`` adds more of them, each with its own token and kubeconfig
(``user_kubeconfig(user)``), whose requests the audit log tells apart (the bench's side-by-side runs).
``stop()`` ends the processes (SIGTERM, then SIGKILL after a grace period) and removes the work directory;
the children also get SIGKILL should the process that started them die (``PR_SET_PDEATHSIG``), so nothing
outlives its owner. Both are idempotent; the class is a context manager.

``restart_apiserver()`` stops kube-apiserver (gracefully or as a crash) and starts it again on the same
address with the same flags and certificates while etcd keeps the data (the soak's API-server restarts,
bench/soak.py); ``audit_policy`` replaces the audit policy (e.g. request bodies of some writes).
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import shutil
import signal
import ssl
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType

from tests.processes import die_with_parent, free_port

from .pki import FRONT_PROXY_USER, Pki, make_pki

ASSETS_ENV = "KUBE_ASSETS"
REQUIRED = ("etcd", "kube-apiserver")
OPTIONAL = ("kube-controller-manager",)
_PR_SET_PDEATHSIG = 1
AUDIT_POLICY = """apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived"]
rules:
- level: Metadata
"""


class ControlPlaneError(RuntimeError):
    """The control plane could not be started; the message names the step and carries the logs' tail."""


def missing_assets(assets: str | os.PathLike[str] | None) -> str:
    """Why ``assets`` cannot start a control plane, in one line; ``""`` when it can."""
    if not assets:
        return f"{ASSETS_ENV} is not set (a directory with {', '.join(REQUIRED)} and optionally {OPTIONAL[0]})"
    directory = Path(assets)
    if not directory.is_dir():
        return f"{ASSETS_ENV}={assets}: no such directory"
    lacking = [name for name in REQUIRED if not os.access(directory / name, os.X_OK)]
    if lacking:
        return f"{ASSETS_ENV}={assets}: no executable {', '.join(lacking)}"
    return ""


@dataclass
class _Proc:
    name: str
    argv: list[str]
    log: Path
    popen: subprocess.Popen[bytes] | None = None

    def start(self, env: dict[str, str]) -> None:
        with self.log.open("ab") as out:
            self.popen = subprocess.Popen(self.argv, stdin=subprocess.DEVNULL, stdout=out, stderr=out, env=env,
                                          preexec_fn=die_with_parent)

    def alive(self) -> bool:
        return self.popen is not None and self.popen.poll() is None

    def tail(self, lines: int = 30) -> str:
        try:
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])
        except FileNotFoundError:
            return ""

    def stop(self, grace: float) -> None:
        proc = self.popen
        if proc is None or proc.poll() is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            proc.send_signal(signal.SIGTERM if grace > 0 else signal.SIGKILL)
        try:
            proc.wait(grace)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                proc.kill()
            proc.wait(10)


@dataclass
class ControlPlane:
    """etcd + kube-apiserver (+ kube-controller-manager) on loopback (module contract)."""

    assets: Path
    workdir: Path | None = None  # default: a fresh temporary directory, removed by stop()
    controller_manager: bool = True  # start it when the binary is there
    audit: bool = True
    audit_policy: str = AUDIT_POLICY  # e.g. request bodies (level Request) for some resources
    apiserver_args: tuple[str, ...] = ()  # extra kube-apiserver flags (e.g. for the bench)
    users: tuple[str, ...] = ()  # extra system:masters users, each with a kubeconfig (``user_kubeconfig``)
    keep: bool = False  # leave the work directory (logs, audit log) for a post-mortem
    url: str = ""
    pki: Pki | None = None
    _procs: list[_Proc] = field(default_factory=list)
    _owned_dir: bool = False
    _env: dict[str, str] = field(default_factory=dict)

    # ------------------------------------------------------------------ paths
    @property
    def admin_kubeconfig(self) -> Path:
        return self._dir / "admin.kubeconfig"

    def user_kubeconfig(self, user: str) -> Path:
        """The kubeconfig of one of ``users`` (a static token of its own: its requests carry its name in the
        audit log)."""
        if self.pki is None or user not in self.pki.user_tokens:
            raise ControlPlaneError(f"no user {user!r} on this control plane (users={self.users!r})")
        return self._dir / f"{user}.kubeconfig"

    @property
    def audit_log(self) -> Path:
        return self._dir / "logs" / "audit.jsonl"

    @property
    def _dir(self) -> Path:
        if self.workdir is None:
            raise ControlPlaneError("the control plane is not started")
        return self.workdir

    def pids(self) -> dict[str, int]:
        """The running processes by name (the bench reads their CPU time)."""
        return {p.name: p.popen.pid for p in self._procs if p.popen is not None and p.popen.poll() is None}

    # ------------------------------------------------------------------ lifecycle
    def __enter__(self) -> ControlPlane:
        self.start()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()

    def start(self, *, within: float = 120.0) -> None:
        why = missing_assets(self.assets)
        if why:
            raise ControlPlaneError(why)
        if self.workdir is None:
            self.workdir = Path(tempfile.mkdtemp(prefix="kc-controlplane-"))
            self._owned_dir = True
        try:
            self._start(within)
        except BaseException:
            self.stop()
            raise

    def _start(self, within: float) -> None:
        workdir = self._dir
        (workdir / "logs").mkdir(parents=True, exist_ok=True)
        self.pki = pki = make_pki(workdir / "pki", users=self.users)
        deadline = time.monotonic() + within
        self._env = env = {k: v for k, v in os.environ.items() if not k.startswith(("KUBECONFIG", "ETCD"))}

        client_port, peer_port = free_port(), free_port()
        etcd_url = f"http://127.0.0.1:{client_port}"
        etcd = _Proc("etcd", [
            str(self.assets / "etcd"), "--name=default", f"--data-dir={workdir / 'etcd'}",
            f"--listen-client-urls={etcd_url}", f"--advertise-client-urls={etcd_url}",
            f"--listen-peer-urls=http://127.0.0.1:{peer_port}",
            f"--initial-advertise-peer-urls=http://127.0.0.1:{peer_port}",
            f"--initial-cluster=default=http://127.0.0.1:{peer_port}",
            "--unsafe-no-fsync=true", "--quota-backend-bytes=8589934592", "--log-level=warn",
        ], workdir / "logs" / "etcd.log")
        self._procs.append(etcd)
        etcd.start(env)
        self._wait(etcd, lambda: self._http_ok(f"{etcd_url}/health"), deadline, "etcd /health")

        port = free_port()
        self.url = f"https://127.0.0.1:{port}"
        (workdir / "audit-policy.yaml").write_text(self.audit_policy)
        audit = ([f"--audit-policy-file={workdir / 'audit-policy.yaml'}", f"--audit-log-path={self.audit_log}",
                  "--audit-log-format=json", "--audit-log-maxsize=0", "--audit-log-mode=batch"]
                 if self.audit else [])
        apiserver = _Proc("kube-apiserver", [
            str(self.assets / "kube-apiserver"), f"--etcd-servers={etcd_url}",
            "--bind-address=127.0.0.1", "--advertise-address=127.0.0.1", f"--secure-port={port}",
            f"--tls-cert-file={pki.serving_cert}", f"--tls-private-key-file={pki.serving_key}",
            f"--client-ca-file={pki.ca_cert}", f"--token-auth-file={pki.token_file}",
            "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
            f"--service-account-key-file={pki.sa_pub}", f"--service-account-signing-key-file={pki.sa_key}",
            # a /16: the bench's 10,000 apps have a Service each (a /24 ran out at 253: "range is full")
            "--authorization-mode=Node,RBAC", "--service-cluster-ip-range=10.0.0.0/16",
            # the `kubernetes` Service's endpoint would be 127.0.0.1, which Endpoints refuse; nothing in
            # the cluster runs Pods that would use it
            "--endpoint-reconciler-type=none",
            f"--requestheader-client-ca-file={pki.ca_cert}", f"--requestheader-allowed-names={FRONT_PROXY_USER}",
            "--requestheader-username-headers=X-Remote-User", "--requestheader-group-headers=X-Remote-Group",
            "--requestheader-extra-headers-prefix=X-Remote-Extra-",
            f"--proxy-client-cert-file={pki.proxy_cert}", f"--proxy-client-key-file={pki.proxy_key}",
            "--allow-privileged=true", "--profiling=false", *audit, *self.apiserver_args,
        ], workdir / "logs" / "kube-apiserver.log")
        self._procs.append(apiserver)
        apiserver.start(env)
        self._write_kubeconfig(self.admin_kubeconfig, user={"token": pki.admin_token})
        for user, token in pki.user_tokens.items():
            self._write_kubeconfig(self._dir / f"{user}.kubeconfig", user={"token": token})
        self._wait(apiserver, lambda: self._api_ok("/readyz"), deadline, "kube-apiserver /readyz")

        kcm_binary = self.assets / "kube-controller-manager"
        if self.controller_manager and os.access(kcm_binary, os.X_OK):
            kcm_config = workdir / "kcm.kubeconfig"
            self._write_kubeconfig(kcm_config, user={"client-certificate": str(pki.kcm_cert),
                                                     "client-key": str(pki.kcm_key)})
            kcm = _Proc("kube-controller-manager", [
                str(kcm_binary), f"--kubeconfig={kcm_config}", f"--authentication-kubeconfig={kcm_config}",
                f"--authorization-kubeconfig={kcm_config}", "--bind-address=127.0.0.1",
                f"--secure-port={free_port()}", "--leader-elect=false",
                f"--service-account-private-key-file={pki.sa_key}", f"--root-ca-file={pki.ca_cert}",
                "--use-service-account-credentials=true", "--controllers=*",
            ], workdir / "logs" / "kube-controller-manager.log")
            self._procs.append(kcm)
            kcm.start(env)
            self._wait(kcm, lambda: self._api_ok("/api/v1/namespaces/default/serviceaccounts/default"), deadline,
                       "kube-controller-manager (the default ServiceAccount)")

    def restart_apiserver(self, *, grace: float = 15.0, down_for: float = 0.0, within: float = 120.0) -> float:
        """Stop kube-apiserver and start it again on the same port with the same flags and certificates;
        etcd keeps the data, the controller manager and every client reconnect.

        The stop is SIGTERM, then SIGKILL after ``grace`` seconds; ``grace=0`` is SIGKILL at once (a crash:
        requests in flight are cut, the audit log's unwritten batch is lost). On SIGTERM kube-apiserver
        stops listening at once and ends its requests, but waits for long-running ones (watches) until its
        own shutdown timeout (60 s, measured on v1.36.3): ``grace`` is how long a kubelet would give it. It
        stays down ``down_for`` seconds more. Returns the seconds from the stop to ``/readyz`` answering
        again. Blocks: call it from a thread in asyncio code."""
        proc = next((p for p in self._procs if p.name == "kube-apiserver"), None)
        if proc is None:
            raise ControlPlaneError("the control plane is not started")
        started = time.monotonic()
        proc.stop(grace)
        time.sleep(down_for)
        proc.start(self._env)
        self._wait(proc, lambda: self._api_ok("/readyz"), time.monotonic() + within, "kube-apiserver /readyz")
        return time.monotonic() - started

    def stop(self, *, grace: float = 15.0) -> None:
        for proc in reversed(self._procs):  # the controller manager first, etcd last
            proc.stop(grace)
        self._procs.clear()
        if self.workdir is not None and self._owned_dir and not self.keep:
            shutil.rmtree(self.workdir, ignore_errors=True)
            self.workdir = None
            self._owned_dir = False

    # ------------------------------------------------------------------ helpers
    def ssl_context(self) -> ssl.SSLContext:
        if self.pki is None:
            raise ControlPlaneError("the control plane is not started")
        return ssl.create_default_context(cadata=self.pki.ca_pem().decode())

    def write_kubeconfig(self, path: Path, *, token: str, server: str | None = None) -> Path:
        """A kubeconfig at ``path`` for a bearer ``token`` (e.g. a ServiceAccount's, from a TokenRequest),
        trusting the control plane's CA, for ``server`` (default the API server; e.g. a proxy in front of
        it on 127.0.0.1, which the serving certificate names)."""
        self._write_kubeconfig(path, user={"token": token}, server=server)
        return path

    def _write_kubeconfig(self, path: Path, *, user: dict[str, str], server: str | None = None) -> None:
        assert self.pki is not None
        config = {
            "apiVersion": "v1", "kind": "Config", "current-context": "controlplane", "preferences": {},
            "clusters": [{"name": "controlplane", "cluster": {
                "server": server or self.url,
                "certificate-authority-data": base64.b64encode(self.pki.ca_pem()).decode()}}],
            "users": [{"name": "user", "user": user}],
            "contexts": [{"name": "controlplane", "context": {"cluster": "controlplane", "user": "user"}}],
        }
        path.write_text(json.dumps(config, indent=2))
        path.chmod(0o600)

    def _http_ok(self, url: str) -> bool:
        with contextlib.suppress(OSError, urllib.error.URLError), urllib.request.urlopen(url, timeout=2) as resp:
            return bool(resp.status == 200)
        return False

    def _api_ok(self, path: str) -> bool:
        assert self.pki is not None
        request = urllib.request.Request(f"{self.url}{path}",
                                         headers={"Authorization": f"Bearer {self.pki.admin_token}"})
        with contextlib.suppress(OSError, urllib.error.URLError), \
                urllib.request.urlopen(request, timeout=2, context=self.ssl_context()) as resp:
            return bool(resp.status == 200)
        return False

    def _wait(self, proc: _Proc, ready: Callable[[], bool], deadline: float, what: str) -> None:
        while True:
            if not proc.alive():
                raise ControlPlaneError(f"{proc.name} exited before {what} was ready:\n{proc.tail()}")
            if ready():
                return
            if time.monotonic() >= deadline:
                raise ControlPlaneError(f"{what} not ready in time:\n{proc.tail()}")
            time.sleep(0.2)


@contextlib.contextmanager
def control_plane(assets: str | os.PathLike[str] | None = None, **options: object) -> Iterator[ControlPlane]:
    """A started ``ControlPlane`` from ``assets`` (default ``$KUBE_ASSETS``), stopped on exit."""
    directory = assets if assets is not None else os.environ.get(ASSETS_ENV)
    why = missing_assets(directory)
    if why:
        raise ControlPlaneError(why)
    assert directory is not None
    plane = ControlPlane(assets=Path(directory), **options)  # type: ignore[arg-type]
    with plane:
        yield plane
