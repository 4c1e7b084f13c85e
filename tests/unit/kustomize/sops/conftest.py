from __future__ import annotations

import shutil
from collections.abc import Iterator

import pytest

from kustomize_controller.kustomize.sops import SopsDecryptor

from .aws_moto import moto_server  # noqa: F401 - a fixture
from .fake_azure import fake_azure  # noqa: F401 - a fixture
from .fake_google import fake_google  # noqa: F401 - a fixture
from .sopsgen import TESTDATA, fixture

requires_gpg = pytest.mark.skipif(shutil.which("gpg") is None, reason="the 'gpg' binary is not on PATH")


@pytest.fixture
def all_keys() -> dict[str, bytes]:
    return {
        "age.agekey": fixture("keys/age.txt"),
        "pgp.asc": fixture("keys/pgp.asc"),
    }


@pytest.fixture
def decryptor(all_keys: dict[str, bytes]) -> Iterator[SopsDecryptor]:
    with SopsDecryptor.from_secret_data(
        all_keys, global_age_keys={"global.agekey": fixture("keys/age-global.txt")}
    ) as dec:
        yield dec


@pytest.fixture(autouse=True)
def _testdata_present() -> None:
    if not TESTDATA.is_dir():
        pytest.fail(f"shared SOPS testdata missing at {TESTDATA}")
