"""The seeded run of every fuzz target (part of ``make test``; ``make fuzz`` is the long, coverage-guided one).

Each target gets its corpus, then ``Target.seeded_runs`` mutations from a ``random.Random`` seeded with
the target's name: the same inputs on every run and machine, no atheris needed. A failure names the
input (hex) so it can be replayed with ``python -m tests.fuzz.replay``.
"""

from __future__ import annotations

import pytest

from tests.fuzz.harness import TARGETS, corpus, load, mutations


def _run(name: str, data: bytes) -> None:
    target = load(name)
    try:
        target.one_input(data)
    except BaseException as err:
        if isinstance(err, KeyboardInterrupt):
            raise
        raise AssertionError(f"{name}: {type(err).__name__} escaped for input {data.hex()}") from err


@pytest.mark.parametrize("name", list(TARGETS))
def test_corpus(name: str) -> None:
    seeds = corpus(load(name))
    assert seeds, f"{name}: empty corpus"
    for data in seeds:
        _run(name, data)


@pytest.mark.parametrize("name", list(TARGETS))
def test_seeded_mutations(name: str) -> None:
    target = load(name)
    for data in mutations(corpus(target), count=target.seeded_runs, seed=f"fuzz-{name}", max_len=target.max_len,
                          dictionary=target.dictionary):
        _run(name, data)
