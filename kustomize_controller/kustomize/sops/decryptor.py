"""``SopsDecryptor``: the build pipeline's ``Decryptor`` for ``spec.decryption.provider: sops``.

Contract:
- ``decrypt_sources(root, kustomization_dir)``: before ``kustomize build``, decrypts in place the
  generator sources and patch files reachable from ``kustomization_dir`` (see ``sources.py``).
  The MAC of every file is verified.
- ``decrypt_object(obj)``: after the build, per object; returns a new object, never mutates the
  input. Skipped (returned as is) when annotated ``kustomize.toolkit.fluxcd.io/decrypt:
  disabled`` (value case-insensitive). An object with a top-level ``sops`` block holding a
  ``mac`` is decrypted whole; its MAC is authenticated but not compared, because the build has
  legitimately changed unencrypted fields (names, namespace, labels) and key order. Otherwise a
  ``Secret``'s ``data`` values (base64) and ``stringData`` values that are SOPS documents
  (detected by marker) are decrypted, read in the detected store and written in the store named
  by the key's extension; their MAC is verified.
- Messages carry upstream's inner context (``failed to decrypt and format '<ns>/<name>' <Kind>
  data: …``, ``… Secret field '<key>': …``, ``'<file>': …``) but not the outer one: the build
  pipeline prefixes ``error decrypting sources: `` and ``decryption failed for
  '<Kind.version.group>/<name>': `` (``pipeline.Decryptor``'s contract).
- Limits: 5 MiB per encrypted file or embedded document.
- ``cache_identity`` (the build cache's view of the keys) digests the decryption Secret's data and,
  with object-level credentials, their ``Credentials.identity``; the controller's own identity is
  the same for every build. A build served from the cache does not ask a key service again.
- Keys come from the constructor (or ``loader.load_decryptor``); ``close()`` (or ``with``)
  removes the temporary GNUPGHOME. One instance per reconcile; not thread-safe (the pipeline
  calls it from worker threads, one call at a time). Recovered data keys are cached for the
  instance's lifetime, so objects sharing a data key cost one unwrap.
- No log line, exception or condition message carries a key or a plaintext; nothing here logs.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import hashlib
from collections.abc import Mapping
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any

from kustomize_controller.kustomize.sops.document import decrypt_bytes, decrypt_mapping
from kustomize_controller.kustomize.sops.errors import SopsError
from kustomize_controller.kustomize.sops.formats import Format, detect_format, format_for_path
from kustomize_controller.kustomize.sops.keys.credentials import Credentials
from kustomize_controller.kustomize.sops.keys.keyring import KeyRing
from kustomize_controller.kustomize.sops.sources import SourceWalker

MAX_ENCRYPTED_FILE_SIZE = 5 << 20
DECRYPT_ANNOTATION = "kustomize.toolkit.fluxcd.io/decrypt"
DISABLED_VALUE = "disabled"


def is_decryption_disabled(obj: Mapping[str, Any]) -> bool:
    metadata = obj.get("metadata")
    annotations = metadata.get("annotations") if isinstance(metadata, Mapping) else None
    if not isinstance(annotations, Mapping):
        return False
    value = annotations.get(DECRYPT_ANNOTATION)
    return isinstance(value, str) and value.lower() == DISABLED_VALUE


def is_sops_encrypted(obj: Mapping[str, Any]) -> bool:
    """A whole-object SOPS document: a non-empty ``sops`` block with a ``mac``."""
    block = obj.get("sops")
    return isinstance(block, Mapping) and bool(block) and bool(block.get("mac"))


def is_encrypted_secret(obj: Mapping[str, Any]) -> bool:
    """The apply-time guard's test: a ``v1`` ``Secret`` that still has a top-level ``sops`` field."""
    return obj.get("apiVersion") == "v1" and obj.get("kind") == "Secret" and "sops" in obj


def gvk_string(obj: Mapping[str, Any]) -> str:
    """kustomize's ``resid.Gvk.String()``: ``Kind.version.group`` with ``[noGrp]`` placeholders."""
    api_version = obj.get("apiVersion") if isinstance(obj.get("apiVersion"), str) else ""
    group, _, version = str(api_version).rpartition("/")
    kind = obj.get("kind") if isinstance(obj.get("kind"), str) else ""
    return ".".join([str(kind) or "[noKind]", version or "[noVer]", group or "[noGrp]"])


def _meta(obj: Mapping[str, Any], field: str) -> str:
    metadata = obj.get("metadata")
    value = metadata.get(field) if isinstance(metadata, Mapping) else None
    return value if isinstance(value, str) else ""


class SopsDecryptor:
    """Decrypts SOPS content with the keys of one Kustomization (one reconcile)."""

    def __init__(
        self,
        *,
        keyring: KeyRing,
        max_file_size: int = MAX_ENCRYPTED_FILE_SIZE,
        verify_mac: bool = True,
        key_digest: str | None = None,
    ) -> None:
        self._keyring = keyring
        self._max_file_size = max_file_size
        self._verify_mac = verify_mac
        self._key_digest = key_digest

    @property
    def cache_identity(self) -> str | None:
        """The identity of the key material (a digest of it, never the keys), for the build cache;
        None when the decryptor was built from a keyring whose origin is unknown."""
        if self._key_digest is None:
            return None
        return f"{self._key_digest}:{self._max_file_size}:{self._verify_mac}"

    @classmethod
    def from_secret_data(
        cls,
        data: Mapping[str, bytes],
        *,
        global_age_keys: Mapping[str, bytes] | None = None,
        max_file_size: int = MAX_ENCRYPTED_FILE_SIZE,
        verify_mac: bool = True,
        secret_label: str = "decryption Secret",
        global_secret_label: str = "global age Secret",
        workload: Credentials | None = None,
        environ: Mapping[str, str] | None = None,
        loop: asyncio.AbstractEventLoop | None = None,
    ) -> SopsDecryptor:
        """Keys from the ``decryption.secretRef`` Secret data and the ``--sops-age-secret`` data.

        From the global data only ``*.agekey`` entries are used. The labels name the Secrets in
        import errors. Raises ``SopsFormatError`` for a malformed age key or cloud credential.
        ``workload``, ``environ`` and ``loop`` go to the key services (``keys/keyring.py``).
        """
        keyring = KeyRing.from_secret_data(
            data,
            global_age_keys=global_age_keys,
            secret_label=secret_label,
            global_secret_label=global_secret_label,
            workload=workload,
            environ=environ,
            loop=loop,
        )
        h = hashlib.sha256()
        for label, source in (("secret", data), ("global", global_age_keys or {})):
            for key in sorted(source):
                h.update(f"{label}\0{key}\0{len(source[key])}\0".encode() + source[key])
        # Builds decrypted with someone's workload identity are only shared with builds of the same
        # identity; credentials that do not say whose they are make the build uncacheable.
        digest: str | None = h.hexdigest()
        if workload is not None and (workload.aws or workload.gcp or workload.azure or workload.vault):
            digest = f"{digest}:{workload.identity}" if workload.identity else None
        return cls(keyring=keyring, max_file_size=max_file_size, verify_mac=verify_mac, key_digest=digest)

    def close(self) -> None:
        self._keyring.close()

    def __enter__(self) -> SopsDecryptor:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    @property
    def gnupg_home(self) -> str | None:
        return self._keyring.gnupg_home

    # -- before build -------------------------------------------------------------------------

    def decrypt_sources(self, root: Path, kustomization_dir: Path) -> None:
        walker = SourceWalker(root, decrypt=self._decrypt_file, max_file_size=self._max_file_size)
        walker.walk(kustomization_dir if kustomization_dir.is_absolute() else root / kustomization_dir)

    def _decrypt_file(self, data: bytes, fmt: Format) -> bytes:
        return decrypt_bytes(data, fmt, fmt, keyring=self._keyring, verify_mac=self._verify_mac)

    # -- after build --------------------------------------------------------------------------

    def decrypt_object(self, obj: dict[str, Any]) -> dict[str, Any]:
        if is_decryption_disabled(obj):
            return obj
        name, namespace, kind = _meta(obj, "name"), _meta(obj, "namespace"), obj.get("kind")
        if is_sops_encrypted(obj):
            try:
                return decrypt_mapping(obj, keyring=self._keyring, verify_mac=False)
            except SopsError as err:
                raise type(err)(f"failed to decrypt and format '{namespace}/{name}' {kind} data: {err}") from None
        if kind == "Secret":
            return self._decrypt_secret_fields(obj, name=name, namespace=namespace)
        return obj

    def _decrypt_secret_fields(self, obj: dict[str, Any], *, name: str, namespace: str) -> dict[str, Any]:
        result = dict(obj)
        for field in ("data", "stringData"):
            values = obj.get(field)
            if not isinstance(values, dict):
                continue
            new_values = dict(values)
            for key, value in values.items():
                if not isinstance(value, str):
                    continue
                if field == "data":
                    try:
                        raw = base64.b64decode(value, validate=True)
                    except (binascii.Error, ValueError):
                        continue
                else:
                    raw = value.encode("utf-8")
                input_format = detect_format(raw)
                if input_format is None:
                    continue
                try:
                    plain = self._decrypt_embedded(raw, input_format, format_for_path(str(key)))
                except SopsError as err:
                    raise type(err)(
                        f"failed to decrypt and format '{namespace}/{name}' Secret field '{key}': {err}"
                    ) from None
                if field == "data":
                    new_values[key] = base64.b64encode(plain).decode("ascii")
                else:
                    new_values[key] = plain.decode("utf-8", errors="replace")
            result[field] = new_values
        return result

    def _decrypt_embedded(self, raw: bytes, input_format: Format, output_format: Format) -> bytes:
        if self._max_file_size > 0 and len(raw) > self._max_file_size:
            raise SopsError(
                f"cannot decrypt document with size ({len(raw)} bytes) exceeding limit ({self._max_file_size})"
            )
        return decrypt_bytes(raw, input_format, output_format, keyring=self._keyring, verify_mac=self._verify_mac)


if TYPE_CHECKING:
    from kustomize_controller.kustomize.pipeline import Decryptor

    def _conforms(decryptor: SopsDecryptor) -> Decryptor:
        return decryptor  # mypy checks SopsDecryptor against the pipeline's Protocol
