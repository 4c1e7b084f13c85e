"""Reading ordinary kubeconfig files without kubernetes-asyncio.

Importing kubernetes-asyncio costs the process about 60 MiB and seconds of start-up (it imports
every generated API model). Most kubeconfigs need none of it: a server, a CA, and a token or a
client certificate. ``read_kubeconfig`` handles exactly those and returns ``None`` when the selected
user needs a credential plugin (``exec``, ``auth-provider``), so the caller falls back to
kubernetes-asyncio's loader for them.

Contract (kubectl's rules):
- ``path`` may be an ``os.pathsep``-separated list; files are merged, the first file defining a
  cluster/user/context name wins, ``current-context`` comes from the first file that sets it.
- Relative file references (``certificate-authority``, ``client-certificate``, ``client-key``,
  ``tokenFile``) are relative to the file that defines them.
- ``*-data`` fields are base64 PEM; client certificate data is written to private (0600) files in a
  temporary directory that is removed when the returned ``ClientConfig`` is garbage collected.
- ``tokenFile`` tokens are re-read as they rotate (``TokenFileAuth``).

Not promised: the legacy ``username``/``password`` kubeconfig fields are supported as basic auth, but
nothing else that kubectl deprecated.
"""

from __future__ import annotations

import base64
import os
import shutil
import tempfile
import weakref
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from kustomize_controller.kube.clientconfig import (
    ClientConfig,
    ConfigError,
    NoAuth,
    StaticToken,
    TokenFileAuth,
)


class BasicAuth:
    def __init__(self, username: str, password: str) -> None:
        self._value = "Basic " + base64.b64encode(f"{username}:{password}".encode()).decode()

    async def authorization(self) -> str | None:
        return self._value

    async def refresh(self) -> bool:
        return False


def _load_files(path: str) -> list[tuple[Path, Mapping[str, Any]]]:
    docs: list[tuple[Path, Mapping[str, Any]]] = []
    for part in path.split(os.pathsep):
        if not part:
            continue
        file = Path(part).expanduser()
        try:
            doc = yaml.safe_load(file.read_text()) or {}
        except (OSError, yaml.YAMLError) as err:
            raise ConfigError(f"invalid kubeconfig {part}: {err}") from err
        if not isinstance(doc, Mapping):
            raise ConfigError(f"invalid kubeconfig {part}: not a mapping")
        docs.append((file.resolve().parent, doc))
    if not docs:
        raise ConfigError(f"invalid kubeconfig {path!r}: no file")
    return docs


def _named(docs: list[tuple[Path, Mapping[str, Any]]], section: str, key: str) -> dict[str, tuple[Path, Any]]:
    found: dict[str, tuple[Path, Any]] = {}
    for base, doc in docs:
        for entry in doc.get(section) or []:
            name = entry.get("name")
            if isinstance(name, str) and name not in found:
                found[name] = (base, entry.get(key) or {})
    return found


def _resolve(base: Path, value: str) -> str:
    return value if os.path.isabs(value) else str(base / value)


def read_kubeconfig(path: str, *, context: str | None = None) -> ClientConfig | None:
    """A ``ClientConfig`` for ``path``, or ``None`` when its user needs a credential plugin."""
    docs = _load_files(path)
    current = context or next((d.get("current-context") for _, d in docs if d.get("current-context")), None)
    contexts = _named(docs, "contexts", "context")
    if not current or current not in contexts:
        raise ConfigError(f"invalid kubeconfig {path}: context {current!r} not found")
    _, ctx = contexts[current]
    clusters = _named(docs, "clusters", "cluster")
    users = _named(docs, "users", "user")
    if ctx.get("cluster") not in clusters:
        raise ConfigError(f"invalid kubeconfig {path}: cluster {ctx.get('cluster')!r} not found")
    cluster_base, cluster = clusters[ctx["cluster"]]
    user_base, user = users.get(ctx.get("user") or "", (cluster_base, {}))
    if user.get("exec") or user.get("auth-provider"):
        return None
    server = str(cluster.get("server") or "").rstrip("/")
    if not server:
        raise ConfigError(f"invalid kubeconfig {path}: cluster {ctx['cluster']!r} has no server")

    tmpdir: str | None = None

    def data_file(name: str, data: str) -> str:
        nonlocal tmpdir
        if tmpdir is None:
            tmpdir = tempfile.mkdtemp(prefix="kubeconfig-")
        target = os.path.join(tmpdir, name)
        fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "wb") as fh:
            fh.write(base64.b64decode(data))
        return target

    try:
        ca_data = None
        if cluster.get("certificate-authority-data"):
            ca_data = base64.b64decode(cluster["certificate-authority-data"]).decode()
        ca_file = None
        if cluster.get("certificate-authority"):
            ca_file = _resolve(cluster_base, cluster["certificate-authority"])
        cert_file = key_file = None
        if user.get("client-certificate-data"):
            cert_file = data_file("client.crt", user["client-certificate-data"])
        elif user.get("client-certificate"):
            cert_file = _resolve(user_base, user["client-certificate"])
        if user.get("client-key-data"):
            key_file = data_file("client.key", user["client-key-data"])
        elif user.get("client-key"):
            key_file = _resolve(user_base, user["client-key"])
    except (ValueError, OSError) as err:
        raise ConfigError(f"invalid kubeconfig {path}: {err}") from err

    auth: Any = NoAuth()
    if user.get("token"):
        auth = StaticToken(str(user["token"]))
    elif user.get("tokenFile"):
        auth = TokenFileAuth(_resolve(user_base, str(user["tokenFile"])))
    elif user.get("username"):
        auth = BasicAuth(str(user["username"]), str(user.get("password") or ""))

    config = ClientConfig(
        server=server,
        auth=auth,
        ca_file=ca_file,
        ca_data=ca_data,
        cert_file=cert_file,
        key_file=key_file,
        verify_ssl=not cluster.get("insecure-skip-tls-verify", False),
        tls_server_name=cluster.get("tls-server-name"),
        proxy=cluster.get("proxy-url"),
        namespace=str(ctx.get("namespace") or "default"),
        source=f"kubeconfig {path}",
    )
    if tmpdir is not None:
        weakref.finalize(config, shutil.rmtree, tmpdir, True)
    return config
