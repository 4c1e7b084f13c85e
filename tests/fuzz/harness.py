"""The fuzzing harness: what a target is, its corpus, and a deterministic mutator for the seeded run.

A *target* is one tenant-reachable parser driven through its public entry point by ``one_input(data)``:
the function turns the bytes into that parser's input, calls it, swallows exactly the typed errors
the parser promises (its *contract*) and checks what must hold of a success. Anything else that
escapes — another exception, a hang, unbounded memory — is a finding.

Two drivers share the targets:

- ``make fuzz`` (``python -m tests.fuzz``): atheris (libFuzzer, coverage-guided), each target in its own
  process for a time budget, with a per-input hang limit and an RSS bound (``__main__.py``);
- ``make test`` (``test_seeded.py``): every target over its corpus plus a fixed number of mutations drawn
  from a seeded ``random.Random`` (``mutations``), so a regression shows in CI without atheris.

This module imports nothing of the package: the atheris driver must import the package *inside*
``atheris.instrument_imports()`` for coverage to be recorded.
"""

from __future__ import annotations

import importlib
import random
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
CORPUS = HERE / "corpus"
REPO = HERE.parents[1]
SHARED = REPO.parent / "shared"

#: target name -> module (tests/fuzz/fuzz_<name>.py); one module per parser family
TARGETS: dict[str, str] = {
    "extract": "fuzz_extract",
    "generate": "fuzz_generate",
    "envsubst": "fuzz_envsubst",
    "sops": "fuzz_sops",
    "duration": "fuzz_duration",
    "cel": "fuzz_cel",
    "conversion": "fuzz_conversion",
    "windows": "fuzz_windows",
}
#: modules atheris instruments for coverage besides the package (imported first by the target)
INSTRUMENT: dict[str, tuple[str, ...]] = {
    "extract": ("tarfile", "gzip"),
    "windows": ("cronsim",),
    "sops": ("configparser",),
}


@dataclass(frozen=True)
class Target:
    """One fuzz target (see the module docstring)."""

    name: str
    one_input: Callable[[bytes], None]
    contract: str  # what may escape, in words (docs/testing.md repeats it)
    max_len: int = 4096
    #: seeds computed at run time (e.g. from ../shared, which the repository does not copy)
    seeds: Callable[[], Iterable[bytes]] = lambda: ()
    #: tokens the mutators insert (also written as a libFuzzer dictionary)
    dictionary: tuple[bytes, ...] = ()
    #: mutations the seeded run of ``make test`` tries after the corpus
    seeded_runs: int = 300
    extra: dict[str, object] = field(default_factory=dict)


def load(name: str) -> Target:
    module = importlib.import_module(f"tests.fuzz.{TARGETS[name]}")
    target: Target = module.TARGET
    return target


def corpus(target: Target) -> list[bytes]:
    """The committed corpus (``corpus/<name>/``, sorted by file name) and the run-time seeds."""
    directory = CORPUS / target.name
    items = [p.read_bytes() for p in sorted(directory.iterdir()) if p.is_file()] if directory.is_dir() else []
    items.extend(target.seeds())
    return items


# --- the deterministic mutator of the seeded run ---------------------------------------------------

_INTERESTING = (
    b"0", b"-1", b"1", b"255", b"65536", b"2147483648", b"9223372036854775808", b"1e309", b"NaN",
    b"\x00", b"\xff", b"\xc3\x28", b"\n", b"\r\n", b'"', b"'", b"\\", b"{", b"}", b"[", b"]",
)  # fmt: skip


def _mutate_once(data: bytearray, rng: random.Random, dictionary: tuple[bytes, ...], pool: list[bytes]) -> None:
    op = rng.randrange(9)
    pos = rng.randrange(len(data) + 1)
    if op == 0 and data:  # flip a bit
        i = rng.randrange(len(data))
        data[i] ^= 1 << rng.randrange(8)
    elif op == 1 and data:  # set a byte
        data[rng.randrange(len(data))] = rng.randrange(256)
    elif op == 2:  # insert random bytes
        data[pos:pos] = bytes(rng.randrange(256) for _ in range(rng.randint(1, 8)))
    elif op == 3 and data:  # delete a range
        end = min(len(data), pos + rng.randint(1, 32))
        del data[pos:end]
    elif op == 4 and data:  # duplicate a range in place
        start = rng.randrange(len(data))
        chunk = data[start : start + rng.randint(1, 64)]
        data[pos:pos] = chunk * rng.randint(1, 4)
    elif op == 5 and dictionary:  # insert a dictionary token
        data[pos:pos] = rng.choice(dictionary)
    elif op == 6:  # insert an interesting value
        data[pos:pos] = rng.choice(_INTERESTING)
    elif op == 7 and pool:  # splice another corpus entry in
        other = rng.choice(pool)
        if other:
            start = rng.randrange(len(other))
            data[pos:pos] = other[start : start + rng.randint(1, 256)]
    elif op == 8 and data:  # truncate
        del data[pos:]


def mutations(seeds: list[bytes], *, count: int, seed: str, max_len: int,
              dictionary: tuple[bytes, ...] = ()) -> Iterator[bytes]:
    """``count`` inputs derived from ``seeds``: each a seed (or nothing) with 1–6 random edits."""
    rng = random.Random(seed)
    for _ in range(count):
        base = bytearray(rng.choice(seeds) if seeds else b"")
        for _ in range(rng.randint(1, 6)):
            _mutate_once(base, rng, dictionary, seeds)
        yield bytes(base[:max_len])


def text(data: bytes) -> str:
    """The input as text, as the API server would hand it to us (JSON strings are valid UTF-8)."""
    return data.decode("utf-8", errors="replace")
