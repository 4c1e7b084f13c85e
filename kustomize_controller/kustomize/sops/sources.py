"""Before the build: decrypt, in place, the local files kustomize will read secrets from.

Contract (Flux's ``DecryptSources``):
- Start at ``kustomization_dir`` and follow ``resources`` and ``components`` that are local
  directories, recursively, each directory once. Entries that do not exist or are not
  directories (files, remote URLs) are skipped; a directory without a kustomization file, or
  with more than one, is an error.
- In each kustomization: ``secretGenerator[].files`` (``key=path`` or ``path``; the store comes
  from the *key*'s extension), ``secretGenerator[].envs`` (store from the path, dotenv when that
  says binary) and ``patches[].path`` (remote URLs skipped). ``configMapGenerator`` sources are
  not touched, as upstream.
- A file is decrypted only if it contains its store's SOPS marker; it must be a regular file (not
  a symlink) of at most ``max_file_size`` bytes; the plaintext replaces it (mode 0600). Each file
  is decrypted at most once.
- Confinement: every path, after resolving symlinks, must stay inside ``root``; one that does not
  is an error naming the path relative to ``root``. Messages never hold file contents.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import yaml

from kustomize_controller.kustomize.sops.errors import SopsError, SopsFormatError
from kustomize_controller.kustomize.sops.formats import MARKERS, Format, format_for_path

_SafeLoader: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

KUSTOMIZATION_FILE_NAMES = ("kustomization.yaml", "kustomization.yml", "Kustomization")

DecryptFn = Callable[[bytes, Format], bytes]


class SourceError(SopsFormatError):
    """A kustomization or a source file could not be read or is outside the root."""


def is_remote_url(path: str) -> bool:
    parsed = urlparse(path)
    return bool(parsed.scheme and parsed.netloc)


class SourceWalker:
    def __init__(self, root: Path, *, decrypt: DecryptFn, max_file_size: int) -> None:
        self._root = Path(os.path.realpath(root))
        self._decrypt = decrypt
        self._max_file_size = max_file_size
        self._visited_dirs: set[Path] = set()
        self._decrypted: set[Path] = set()

    def _rel(self, path: Path) -> str:
        # Relative to the root, never the absolute temporary path of the artifact.
        return os.path.relpath(os.path.normpath(path), self._root)

    def _confine(self, path: Path) -> Path:
        """The real path of ``path``, which must be inside the root."""
        absolute = path if path.is_absolute() else self._root / path
        real = Path(os.path.realpath(absolute))
        if real != self._root and self._root not in real.parents:
            raise SourceError(f"path '{self._rel(absolute)}' resolves outside the root")
        return real

    def walk(self, directory: Path) -> None:
        real = self._confine(directory)
        if real in self._visited_dirs:
            return
        self._visited_dirs.add(real)
        kustomization = self._load_kustomization(real)
        self._visit_sources(real, kustomization)
        for entry in [*_strings(kustomization.get("resources")), *_strings(kustomization.get("components"))]:
            if is_remote_url(entry):
                continue
            candidate = Path(entry) if Path(entry).is_absolute() else real / entry
            # Skipped like upstream when missing or not a directory: a file resource, a remote base.
            if not os.path.isdir(os.path.normpath(candidate)):
                continue
            self.walk(candidate)

    def _load_kustomization(self, directory: Path) -> dict[str, Any]:
        found = [directory / name for name in KUSTOMIZATION_FILE_NAMES if (directory / name).exists()]
        if not found:
            raise SourceError(f"no kustomization file found in '{self._rel(directory)}'")
        if len(found) > 1:
            raise SourceError(f"found multiple kustomization files in '{self._rel(directory)}'")
        path = found[0]
        if not stat.S_ISREG(os.lstat(path).st_mode):
            raise SourceError(f"expected {path.name} in '{self._rel(directory)}' to be a regular file")
        try:
            doc = yaml.load(path.read_bytes(), Loader=_SafeLoader)
        except (yaml.YAMLError, UnicodeDecodeError) as err:
            raise SourceError(
                f"failed to unmarshal kustomization file from '{self._rel(path)}': {type(err).__name__}"
            ) from None
        if doc is None:
            return {}
        if not isinstance(doc, dict):
            raise SourceError(f"failed to unmarshal kustomization file from '{self._rel(path)}': not a mapping")
        return doc

    def _visit_sources(self, directory: Path, kustomization: dict[str, Any]) -> None:
        for generator in _dicts(kustomization.get("secretGenerator")):
            for source in _strings(generator.get("files")):
                key, sep, file_path = source.partition("=")
                self._decrypt_ref(directory, file_path if sep else key, format_for_path(key))
            for env in _strings(generator.get("envs")):
                fmt = format_for_path(env)
                self._decrypt_ref(directory, env, Format.DOTENV if fmt is Format.BINARY else fmt)
        for patch in _dicts(kustomization.get("patches")):
            path = patch.get("path")
            if isinstance(path, str) and path and not is_remote_url(path):
                self._decrypt_ref(directory, path, format_for_path(path))

    def _decrypt_ref(self, directory: Path, ref: str, fmt: Format) -> None:
        candidate = Path(ref) if Path(ref).is_absolute() else directory / ref
        lexical = Path(os.path.normpath(candidate))
        # Refuse a symlinked file (upstream: "irregular file"); its parents may be symlinks.
        real = self._confine(lexical)
        if real in self._decrypted:
            return
        rel = self._rel(lexical)
        try:
            info = os.lstat(lexical)
        except FileNotFoundError:
            raise SourceError(f"lstat {rel}: no such file or directory") from None
        except OSError as err:
            raise SourceError(f"lstat {rel}: {err.strerror}") from None
        if not stat.S_ISREG(info.st_mode):
            raise SourceError(f"cannot decrypt irregular file '{rel}' as it has file mode type bits set")
        if self._max_file_size > 0 and info.st_size > self._max_file_size:
            raise SourceError(
                f"cannot decrypt file '{rel}' with size ({info.st_size} bytes) exceeding limit ({self._max_file_size})"
            )
        data = real.read_bytes()
        if MARKERS[fmt] not in data:
            return
        try:
            plain = self._decrypt(data, fmt)
        except SopsError as err:
            raise type(err)(f"'{rel}': {err}") from None
        os.chmod(real, 0o600)
        real.write_bytes(plain)
        self._decrypted.add(real)


def _strings(value: Any) -> list[str]:
    return [v for v in value if isinstance(v, str)] if isinstance(value, list) else []


def _dicts(value: Any) -> list[dict[str, Any]]:
    return [v for v in value if isinstance(v, dict)] if isinstance(value, list) else []
