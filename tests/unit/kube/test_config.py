import textwrap
from pathlib import Path

import pytest

from kustomize_controller.kube.config import ConfigError, load_config, load_kubeconfig

KUBECONFIG = textwrap.dedent(
    """
    apiVersion: v1
    kind: Config
    current-context: dev
    clusters:
    - name: c
      cluster: {server: "http://127.0.0.1:6443/", insecure-skip-tls-verify: true}
    users:
    - name: u
      user: {token: secret-token}
    contexts:
    - name: dev
      context: {cluster: c, user: u, namespace: apps}
    - name: other
      context: {cluster: c, user: u}
    """
)


def write(tmp_path: Path, name: str = "config") -> str:
    path = tmp_path / name
    path.write_text(KUBECONFIG)
    return str(path)


async def test_kubeconfig_token_server_and_namespace(tmp_path: Path) -> None:
    cfg = await load_kubeconfig(write(tmp_path))
    assert cfg.server == "http://127.0.0.1:6443"
    assert await cfg.auth.authorization() == "Bearer secret-token"
    assert cfg.namespace == "apps"
    other = await load_kubeconfig(write(tmp_path), context="other")
    assert other.namespace == "default"


async def test_flag_wins_over_env(tmp_path: Path) -> None:
    flag = write(tmp_path, "flag")
    env = {"KUBECONFIG": str(tmp_path / "missing"), "HOME": str(tmp_path)}
    cfg = await load_config(kubeconfig=flag, environ=env)
    assert cfg.source == f"kubeconfig {flag}"


async def test_env_then_home(tmp_path: Path) -> None:
    path = write(tmp_path, "env")
    assert (await load_config(environ={"KUBECONFIG": path, "HOME": str(tmp_path)})).source == f"kubeconfig {path}"
    (tmp_path / ".kube").mkdir()
    home = write(tmp_path / ".kube", "config")
    assert (await load_config(environ={"HOME": str(tmp_path)})).source == f"kubeconfig {home}"


async def test_nothing_found_says_what_was_tried(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="no Kubernetes configuration found; tried") as err:
        await load_config(
            environ={"HOME": str(tmp_path), "KUBERNETES_SERVICE_HOST": "10.0.0.1", "KUBERNETES_SERVICE_PORT": "443"}
        )
    assert "in-cluster configuration unavailable" in str(err.value)


async def test_broken_kubeconfig_is_a_clear_error(tmp_path: Path) -> None:
    path = tmp_path / "bad"
    path.write_text("apiVersion: v1\nkind: Config\ncontexts: []\n")
    with pytest.raises(ConfigError, match=f"invalid kubeconfig {path}"):
        await load_kubeconfig(str(path))


async def test_in_cluster_reads_the_mount_and_follows_token_rotation(tmp_path: Path) -> None:
    from kustomize_controller.kube.config import TokenFileAuth, load_incluster
    from kustomize_controller.runtime.clock import FakeClock

    token, ca, ns = tmp_path / "token", tmp_path / "ca.crt", tmp_path / "namespace"
    token.write_text("first\n")
    ca.write_text("-----BEGIN CERTIFICATE-----\nnot parsed here\n-----END CERTIFICATE-----\n")
    ns.write_text("flux-system\n")
    env = {"KUBERNETES_SERVICE_HOST": "10.0.0.1", "KUBERNETES_SERVICE_PORT": "443"}
    cfg = load_incluster(environ=env, token_file=str(token), ca_file=str(ca), namespace_file=str(ns))
    assert (cfg.server, cfg.namespace, cfg.ca_file) == ("https://10.0.0.1:443", "flux-system", str(ca))
    assert await cfg.auth.authorization() == "Bearer first"

    clock = FakeClock()
    auth = TokenFileAuth(str(token), clock=clock)
    assert await auth.authorization() == "Bearer first"
    token.write_text("second\n")
    assert await auth.authorization() == "Bearer first"  # cached within the period
    await clock.advance(60)
    assert await auth.authorization() == "Bearer second"
    token.write_text("third")
    assert await auth.refresh() is True  # a 401 forces a re-read
    assert await auth.authorization() == "Bearer third"
    token.unlink()
    assert await auth.refresh() is False  # a missing file keeps the last good token
    assert await auth.authorization() == "Bearer third"
