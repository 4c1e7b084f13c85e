"""One target under atheris (the child process of ``python -m tests.fuzz``).

    python -m tests.fuzz.run TARGET [--workdir .fuzz] -- [libFuzzer flags]

The target module (and through it the package) is imported inside ``atheris.instrument_imports`` so
libFuzzer sees the package's branches, and those of the modules the target names (``tarfile``,
``cronsim``, ...).
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from pathlib import Path

import atheris

from tests.fuzz.harness import CORPUS, REPO, TARGETS, Target


def _dictionary(target: Target, path: Path) -> None:
    lines = []
    for token in target.dictionary:
        escaped = "".join(chr(b) if 0x20 <= b < 0x7F and b not in (0x22, 0x5C) else f"\\x{b:02x}" for b in token)
        lines.append(f'"{escaped}"')
    path.write_text("\n".join(lines) + "\n")


def main() -> None:
    argv = sys.argv[1:]
    flags: list[str] = []
    if "--" in argv:
        argv, flags = argv[: argv.index("--")], argv[argv.index("--") + 1 :]
    parser = argparse.ArgumentParser(prog="python -m tests.fuzz.run")
    parser.add_argument("target", choices=list(TARGETS))
    parser.add_argument("--workdir", type=Path, default=REPO / ".fuzz")
    args = parser.parse_args(argv)

    import tests.fuzz.harness as harness

    # libFuzzer ends the process without running atexit handlers: the targets' temp directories go under
    # the work directory, emptied at each start, rather than into /tmp for good
    scratch = args.workdir / "tmp" / args.target
    shutil.rmtree(scratch, ignore_errors=True)
    scratch.mkdir(parents=True)
    tempfile.tempdir = str(scratch)

    extra = harness.INSTRUMENT.get(args.target, ())
    before = set(sys.modules)
    with atheris.instrument_imports(include=["kustomize_controller", *extra]):
        target = harness.load(args.target)
    for module in extra:  # imported before (by atheris, or the interpreter): instrument in place
        mod = sys.modules.get(module)
        if module in before and mod is not None and getattr(mod, "__file__", "").endswith(".py"):
            for value in vars(mod).values():
                _instrument(value)

    work = args.workdir
    found = work / "corpus" / target.name
    seeds = work / "seeds" / target.name
    crashes = work / "crashes" / target.name
    for directory in (found, seeds, crashes):
        directory.mkdir(parents=True, exist_ok=True)
    for i, seed in enumerate(target.seeds()):
        (seeds / f"seed-{i:03d}").write_bytes(seed)
    dictionary = work / "dict" / f"{target.name}.dict"
    dictionary.parent.mkdir(parents=True, exist_ok=True)
    _dictionary(target, dictionary)
    corpora = [str(found), str(seeds)]
    if (CORPUS / target.name).is_dir():
        corpora.append(str(CORPUS / target.name))
    libfuzzer = [sys.argv[0], f"-max_len={target.max_len}", f"-artifact_prefix={crashes}/",
                 *([f"-dict={dictionary}"] if target.dictionary else []), *flags, *corpora]
    atheris.Setup(libfuzzer, target.one_input)
    atheris.Fuzz()


def _instrument(value: object) -> None:
    import types

    if isinstance(value, types.FunctionType):
        atheris.instrument_func(value)
    elif isinstance(value, type):
        for member in vars(value).values():
            if isinstance(member, types.FunctionType):
                atheris.instrument_func(member)
            elif isinstance(member, (staticmethod, classmethod)) and isinstance(member.__func__, types.FunctionType):
                atheris.instrument_func(member.__func__)


if __name__ == "__main__":
    main()
