"""Quantity canonicalisation (the real server's ``resource.Quantity`` round trip), table-driven."""

from __future__ import annotations

import pytest

from kustomize_controller.testing.apiserver.quantity import MALFORMED, canonical


@pytest.mark.parametrize(
    ("given", "stored"),
    [
        ("1.5", "1500m"),
        ("1000m", "1"),
        ("1024Mi", "1Gi"),
        ("2048Ki", "2Mi"),
        (2, "2"),  # a YAML int
        (1.5, "1500m"),  # a YAML float
        ("1e3", "1e3"),
        ("1E3", "1e3"),
        ("12e2", "1200"),
        ("129e6", "129e6"),
        ("128974848", "128974848"),
        ("2000", "2k"),
        ("1500", "1500"),
        ("0.5", "500m"),
        ("1536Mi", "1536Mi"),
        ("0.5Ki", "512"),  # a binary value below 1024 is written in decimal
        ("1Ki", "1Ki"),
        ("0.1n", "1n"),  # rounded up to the next nano unit
        ("-1.5", "-1500m"),
        ("0", "0"),
        ("0Mi", "0"),
    ],
)
def test_canonical(given: object, stored: str) -> None:
    assert canonical(given) == stored


def test_resource_lists_round_up_to_milli_units() -> None:
    assert canonical("100u", scale=-3) == "1m"
    assert canonical("1.0001", scale=-3) == "1001m"
    assert canonical("250m", scale=-3) == "250m"


@pytest.mark.parametrize("given", ["abc", "1.5.5", "", "1Kb", "--1", True, None, float("inf")])
def test_malformed(given: object) -> None:
    with pytest.raises(ValueError, match="quantities must match the regular expression"):
        canonical(given)
    assert "^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$" in MALFORMED
