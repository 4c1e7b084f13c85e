"""Issue 23: what the first decryption with each cloud key service (and Vault transit) costs, and what a controller
that never meets a cloud key pays for them (nothing: the modules are imported lazily).

Three kinds of process, so that no measurement includes another's imports:
- ``serve``: the loopback services (moto for AWS KMS, the test suite's fake Google, Azure and Vault) and
  the documents, encrypted here (boto3 stays in this process); prints a JSON spec, runs until
  stdin closes.
- ``measure <provider>``: imports what the controller imports (``kustomize_controller.app``),
  then decrypts one document with that provider's static credentials: wall and CPU time and the
  resident-memory growth of the first decryption (module imports, token request, key service
  call), the time of a second one (a new reconcile: modules loaded, no token cache), and the
  modules the first one added.
- ``measure none``: the same controller process decrypting an age document: which key service
  modules and cloud SDKs are loaded (expected: none) and its resident memory.

Loopback servers on the same machine: the times are the controller's CPU plus two or three local
HTTP round trips, not a cloud's latency.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

PROVIDERS = ("aws", "gcp", "azure", "vault")
CLOUD_MODULES = (
    "kustomize_controller.kustomize.sops.keys.awskms",
    "kustomize_controller.kustomize.sops.keys.aws_credentials",
    "kustomize_controller.kustomize.sops.keys.gcpkms",
    "kustomize_controller.kustomize.sops.keys.gcp_credentials",
    "kustomize_controller.kustomize.sops.keys.azkv",
    "kustomize_controller.kustomize.sops.keys.azure_credentials",
    "kustomize_controller.kustomize.sops.keys.vault_auth",
    "botocore",
    "boto3",
    "google",
    "azure",
)
ROOT = Path(__file__).resolve().parent.parent


def _rss_mib() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


# -- serve ----------------------------------------------------------------------------------------


async def _serve(workdir: Path) -> None:
    from moto.server import ThreadedMotoServer

    from tests.fakes.vault import FakeVault
    from tests.loopback import serve
    from tests.unit.kustomize.sops.aws_moto import PLAIN, STATIC_SECRET_YAML, Moto, recipe
    from tests.unit.kustomize.sops.fake_azure import CLIENT_ID, CLIENT_SECRET, TENANT, FakeAzure
    from tests.unit.kustomize.sops.fake_google import KEY, FakeGoogle
    from tests.unit.kustomize.sops.sopsgen import encrypt_document

    moto = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    moto.start()
    host, port = moto.get_host_and_port()
    aws = Moto(f"http://{host}:{port}")
    google, azure = FakeGoogle(), FakeAzure()
    runners = []
    for fake in (google, azure):
        runner, fake.url = await serve(fake.app())
        runners.append(runner)
    spec: dict[str, Any] = {}
    arn = aws.create_key()
    (workdir / "aws.yaml").write_bytes(aws.document(arn, context={"bench": "1"}))
    spec["aws"] = {
        "doc": str(workdir / "aws.yaml"),
        "secret": {"sops.aws-kms": STATIC_SECRET_YAML.decode()},
        "env": {"AWS_ENDPOINT_URL": aws.url},
    }
    data_key = os.urandom(32)
    entry = {"resource_id": KEY, "enc": google.encrypt(KEY, data_key)}
    (workdir / "gcp.yaml").write_bytes(
        encrypt_document(PLAIN, "yaml", recipe(extra_key_entries={"gcp_kms": [entry]}), key=data_key)
    )
    spec["gcp"] = {
        "doc": str(workdir / "gcp.yaml"),
        "secret": {"sops.gcp-kms": google.service_account_json().decode()},
        "env": {"SOPS_GCP_KMS_ENDPOINT": google.url},
    }
    data_key = os.urandom(32)
    (workdir / "azure.yaml").write_bytes(
        encrypt_document(PLAIN, "yaml", recipe(extra_key_entries={"azure_kv": [azure.entry(data_key)]}), key=data_key)
    )
    azure_secret = {
        "tenantId": TENANT,
        "clientId": CLIENT_ID,
        "clientSecret": CLIENT_SECRET,
        "authorityHost": azure.url,
    }
    spec["azure"] = {
        "doc": str(workdir / "azure.yaml"),
        "secret": {"sops.azure-kv": json.dumps(azure_secret)},
        "env": {},
    }
    vault = FakeVault()
    vault.add_key("sops", "bench")
    vault.add_token("bench-root-token")
    await vault.start()
    data_key = os.urandom(32)
    vault_entry = {"vault_address": vault.url, "engine_path": "sops", "key_name": "bench",
                   "enc": vault.encrypt("sops", "bench", data_key)}
    (workdir / "vault.yaml").write_bytes(
        encrypt_document(PLAIN, "yaml", recipe(extra_key_entries={"hc_vault": [vault_entry]}), key=data_key)
    )
    spec["vault"] = {"doc": str(workdir / "vault.yaml"), "secret": {"sops.vault-token": "bench-root-token"}, "env": {}}
    print(json.dumps(spec), flush=True)
    try:
        await asyncio.to_thread(sys.stdin.read)  # until the driver closes our stdin
    finally:
        for runner in runners:
            await runner.cleanup()
        await vault.stop()
        moto.stop()


# -- measure --------------------------------------------------------------------------------------


def _measure(provider: str, spec: dict[str, Any]) -> dict[str, float]:
    import kustomize_controller.app  # noqa: F401 - what the controller has loaded before any reconcile
    from kustomize_controller.kustomize.sops import SopsDecryptor
    from kustomize_controller.kustomize.sops.formats import Format

    if provider == "none":
        from tests.unit.kustomize.sops.sopsgen import TESTDATA

        doc = (TESTDATA / "algorithms" / "age.yaml").read_bytes()
        secret = {"age.agekey": (TESTDATA / "keys" / "age.txt").read_bytes()}
        with SopsDecryptor.from_secret_data(secret, environ={}) as dec:
            dec._decrypt_file(doc, Format.YAML)
        loaded = [m for m in CLOUD_MODULES if m in sys.modules]
        return {"cloud_modules_loaded": float(len(loaded)), "rss_mib": _rss_mib()}

    entry = spec[provider]
    doc = Path(entry["doc"]).read_bytes()
    secret = {k: v.encode() for k, v in entry["secret"].items()}
    environ = {"HOME": "/nonexistent", **entry["env"]}

    def once() -> None:
        with SopsDecryptor.from_secret_data(secret, environ=environ) as dec:
            dec._decrypt_file(doc, Format.YAML)

    modules, rss = len(sys.modules), _rss_mib()
    wall, cpu = time.perf_counter(), time.process_time()
    once()
    first_wall, first_cpu = time.perf_counter() - wall, time.process_time() - cpu
    grown, added = _rss_mib() - rss, len(sys.modules) - modules
    wall = time.perf_counter()
    once()
    return {
        "first_ms": first_wall * 1000,
        "first_cpu_ms": first_cpu * 1000,
        "first_rss_mib": grown,
        "modules_added": float(added),
        "second_ms": (time.perf_counter() - wall) * 1000,
    }


async def key_services(workdir: Path, *, into: dict[str, float]) -> None:
    """The scenario: one serve process, one measuring process per provider, and the idle check."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    server = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "bench.key_services",
        "serve",
        str(workdir),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        cwd=ROOT,
        env=env,
    )
    try:
        assert server.stdout is not None and server.stdin is not None
        line = await asyncio.wait_for(server.stdout.readline(), 120)
        spec = json.loads(line)
        for provider in (*PROVIDERS, "none"):
            proc = await asyncio.create_subprocess_exec(
                sys.executable,
                "-m",
                "bench.key_services",
                "measure",
                provider,
                json.dumps(spec),
                stdout=subprocess.PIPE,
                cwd=ROOT,
                env=env,
            )
            out, _ = await asyncio.wait_for(proc.communicate(), 120)
            if proc.returncode != 0:
                raise RuntimeError(f"measure {provider} exited {proc.returncode}")
            for metric, value in json.loads(out).items():
                into[f"{provider}_{metric}"] = value
    finally:
        if server.stdin is not None:
            server.stdin.close()
        try:
            await asyncio.wait_for(server.wait(), 30)
        except TimeoutError:
            server.kill()
            await server.wait()


def main(argv: list[str]) -> int:
    if argv[:1] == ["serve"]:
        asyncio.run(_serve(Path(argv[1])))
        return 0
    if argv[:1] == ["measure"]:
        print(json.dumps(_measure(argv[1], json.loads(argv[2]))))
        return 0
    workdir = Path(argv[0]) if argv else Path("/tmp")
    metrics: dict[str, float] = {}
    asyncio.run(key_services(workdir, into=metrics))
    print(json.dumps(metrics, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
