"""Manual benchmark (not collected by pytest): ``.venv/bin/python -m tests.unit.kustomize.sops.bench_sops``.

Measures the cost of the pieces a reconcile pays for: age unwrap + tree walk per document, the
data-key cache across objects sharing a key, a large document, and the one-off GnuPG session.
"""

from __future__ import annotations

import base64
import time
from collections.abc import Callable

import yaml

from kustomize_controller.kustomize.sops import SopsDecryptor

from .sopsgen import AgeKey, Recipe, encrypt_document, fixture


def timed(label: str, fn: Callable[[], object], repeat: int = 1) -> None:
    start = time.perf_counter()
    for _ in range(repeat):
        fn()
    per = (time.perf_counter() - start) / repeat
    print(f"{label:<60} {per * 1000:9.3f} ms")


def main() -> None:
    age_obj = yaml.safe_load(fixture("algorithms/age.yaml"))
    keys = {"age.agekey": fixture("keys/age.txt"), "pgp.asc": fixture("keys/pgp.asc")}

    def fresh_age() -> None:
        with SopsDecryptor.from_secret_data(keys) as dec:
            dec.decrypt_object(age_obj)

    timed("age fixture, fresh decryptor (unwrap + walk)", fresh_age, 200)
    with SopsDecryptor.from_secret_data(keys) as dec:
        dec.decrypt_object(age_obj)
        timed("age fixture, cached data key (walk only)", lambda: dec.decrypt_object(age_obj), 2000)

    pgp_obj = yaml.safe_load(fixture("algorithms/pgp.yaml"))

    def fresh_pgp() -> None:
        with SopsDecryptor.from_secret_data(keys) as dec:
            dec.decrypt_object(pgp_obj)

    timed("pgp fixture, fresh decryptor (GNUPGHOME + import + gpg)", fresh_pgp, 5)

    key = AgeKey.generate()
    big = {f"k{i}": f"value-{i}" * 8 for i in range(10_000)}
    doc = encrypt_document(big, "yaml", Recipe(age_recipients=[key.recipient]))
    obj = {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": "b"},
        "data": {"big.yaml": base64.b64encode(doc).decode()},
    }
    print(f"large document: {len(doc) / 1024:.0f} KiB, 10000 encrypted values")
    with SopsDecryptor.from_secret_data(key.secret_data) as dec:
        timed("Secret data field, 10000-value YAML document", lambda: dec.decrypt_object(obj), 3)


if __name__ == "__main__":
    main()
