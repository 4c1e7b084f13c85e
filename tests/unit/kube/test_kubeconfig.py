import base64
import gc
import os
from pathlib import Path

import pytest

from kustomize_controller.kube.config import ConfigError, StaticToken, TokenFileAuth, load_kubeconfig
from kustomize_controller.kube.kubeconfig import BasicAuth, read_kubeconfig


def b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def write(path: Path, body: str) -> str:
    path.write_text(body)
    return str(path)


KUBECONFIG = """apiVersion: v1
kind: Config
current-context: main
contexts:
- name: main
  context: {{cluster: c1, user: u1, namespace: apps}}
- name: other
  context: {{cluster: c2, user: u2}}
clusters:
- name: c1
  cluster: {{server: "https://10.0.0.1:6443/", certificate-authority-data: {}, tls-server-name: api.local}}
- name: c2
  cluster: {{server: "https://10.0.0.2:6443", certificate-authority: ca.pem, insecure-skip-tls-verify: true}}
users:
- name: u1
  user: {{token: secret-token}}
- name: u2
  user: {{client-certificate-data: {}, client-key-data: {}}}
""".format(b64("CA-PEM"), b64("CERT"), b64("KEY"))


def test_token_user_with_ca_data_and_namespace(tmp_path: Path) -> None:
    config = read_kubeconfig(write(tmp_path / "kc", KUBECONFIG))
    assert config is not None
    assert config.server == "https://10.0.0.1:6443"
    assert config.ca_data == "CA-PEM" and config.ca_file is None
    assert config.tls_server_name == "api.local"
    assert config.namespace == "apps"
    assert isinstance(config.auth, StaticToken) and config.auth.token == "secret-token"


def test_client_certificate_data_goes_to_private_files_removed_with_the_config(tmp_path: Path) -> None:
    config = read_kubeconfig(write(tmp_path / "kc", KUBECONFIG), context="other")
    assert config is not None
    assert config.ca_file == str(tmp_path / "ca.pem")  # relative to the kubeconfig file
    assert config.verify_ssl is False
    assert config.cert_file is not None and config.key_file is not None
    assert Path(config.cert_file).read_text() == "CERT" and Path(config.key_file).read_text() == "KEY"
    assert os.stat(config.key_file).st_mode & 0o777 == 0o600
    directory = Path(config.key_file).parent
    del config
    gc.collect()
    assert not directory.exists()


def test_merged_path_list_first_definition_wins(tmp_path: Path) -> None:
    first = write(tmp_path / "a", """current-context: x
contexts: [{name: x, context: {cluster: c, user: u}}]
clusters: [{name: c, cluster: {server: "https://first"}}]
users: [{name: u, user: {tokenFile: token}}]
""")
    second = write(tmp_path / "b", """current-context: y
clusters: [{name: c, cluster: {server: "https://second"}}]
users: [{name: basic, user: {username: admin, password: pw}}]
contexts: [{name: y, context: {cluster: c, user: basic}}]
""")
    config = read_kubeconfig(f"{first}{os.pathsep}{second}")
    assert config is not None and config.server == "https://first"
    assert isinstance(config.auth, TokenFileAuth) and config.auth.path == str(tmp_path / "token")
    basic = read_kubeconfig(f"{first}{os.pathsep}{second}", context="y")
    assert basic is not None and isinstance(basic.auth, BasicAuth)


def test_credential_plugins_are_left_to_kubernetes_asyncio(tmp_path: Path) -> None:
    path = write(tmp_path / "kc", """current-context: x
contexts: [{name: x, context: {cluster: c, user: u}}]
clusters: [{name: c, cluster: {server: "https://api"}}]
users: [{name: u, user: {exec: {apiVersion: client.authentication.k8s.io/v1, command: /bin/true}}}]
""")
    assert read_kubeconfig(path) is None


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ("current-context: nope\ncontexts: []\n", "context 'nope' not found"),
        ("current-context: x\ncontexts: [{name: x, context: {cluster: gone}}]\n", "cluster 'gone' not found"),
        ("- a list\n", "not a mapping"),
    ],
)
async def test_errors_name_the_problem(tmp_path: Path, body: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        await load_kubeconfig(write(tmp_path / "kc", body))


def test_in_cluster_without_importing_kubernetes_asyncio(tmp_path: Path) -> None:
    from kustomize_controller.kube.config import load_incluster

    token, ca = tmp_path / "token", tmp_path / "ca.crt"
    token.write_text("t")
    ca.write_text("ca")
    env = {"KUBERNETES_SERVICE_HOST": "fd00::1", "KUBERNETES_SERVICE_PORT": "443"}
    cfg = load_incluster(environ=env, token_file=str(token), ca_file=str(ca), namespace_file=str(tmp_path / "none"))
    assert cfg.server == "https://[fd00::1]:443" and cfg.namespace == "default"
    with pytest.raises(ConfigError, match="KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT must be set"):
        load_incluster(environ={}, token_file=str(token), ca_file=str(ca))
    with pytest.raises(ConfigError, match=r"service account token .* not found"):
        load_incluster(environ=env, token_file=str(tmp_path / "missing"), ca_file=str(ca))


def test_the_kubeconfig_reader_stands_below_the_loader() -> None:
    """``kube.config`` uses ``kube.kubeconfig``, never the other way round: the reader and the loader
    share only ``kube.clientconfig``'s types, which the loader re-exports unchanged."""
    import subprocess
    import sys

    from kustomize_controller.kube import clientconfig, config

    probe = (
        "import sys, kustomize_controller.kube.kubeconfig as k; "
        "assert 'kustomize_controller.kube.config' not in sys.modules, 'kubeconfig imports kube.config'"
    )
    subprocess.run([sys.executable, "-c", probe], check=True, timeout=60)
    for name in ("ClientConfig", "ConfigError", "NoAuth", "StaticToken", "TokenFileAuth", "Authenticator"):
        assert getattr(config, name) is getattr(clientconfig, name)
