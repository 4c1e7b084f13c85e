"""Which SOPS store reads a file: by name (extension) or by content (marker bytes).

Contract (as Flux's decryptor):
- ``format_for_path``: ``.yaml``/``.yml`` YAML, ``.json`` JSON, ``.env`` dotenv, ``.ini`` INI,
  anything else binary; a name ending in ``.dockerconfigjson`` is JSON.
- ``detect_format``: the store whose SOPS marker the content contains, ``None`` when none does.
  JSON and binary share a marker (a binary document *is* a JSON document); it is reported as
  JSON, which loads both the same way.
"""

from __future__ import annotations

import enum


class Format(enum.Enum):
    BINARY = "binary"
    DOTENV = "dotenv"
    INI = "INI"
    JSON = "JSON"
    YAML = "YAML"


MARKERS: dict[Format, bytes] = {
    Format.BINARY: b'"mac": "ENC[',
    Format.DOTENV: b"sops_mac=ENC[",
    Format.INI: b"[sops]",
    Format.JSON: b'"mac": "ENC[',
    Format.YAML: b"mac: ENC[",
}

_DETECT_ORDER = (Format.JSON, Format.DOTENV, Format.INI, Format.YAML)


def format_for_path(path: str) -> Format:
    if path.endswith(".dockerconfigjson"):
        return Format.JSON
    if path.endswith((".yaml", ".yml")):
        return Format.YAML
    if path.endswith(".json"):
        return Format.JSON
    if path.endswith(".env"):
        return Format.DOTENV
    if path.endswith(".ini"):
        return Format.INI
    return Format.BINARY


def detect_format(data: bytes) -> Format | None:
    for fmt in _DETECT_ORDER:
        if MARKERS[fmt] in data:
            return fmt
    return None
