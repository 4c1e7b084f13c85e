"""Resource quantities as kube-apiserver stores them (apimachinery ``resource.Quantity``).

Contract: ``canonical(value)`` parses a quantity (a string such as ``"1.5"``, ``"1024Mi"``, ``"1e3"``, or a
JSON number, which the real decoder accepts too) and returns the string the real server writes back:
- the suffix family is kept: binary (``Ki``…``Ei``), decimal SI (``n``…``E``, or none), decimal exponent
  (``e3``); the value is written with the largest suffix of that family that keeps an integer mantissa
  (``1000m`` → ``1``, ``1.5`` → ``1500m``, ``2000`` → ``2k``, ``1024Mi`` → ``1Gi``, ``2048Ki`` → ``2Mi``,
  ``1e3`` → ``1e3``, ``1200e0`` → ``1200``);
- a binary value that is not a whole number, or whose magnitude is below 1024, is written in decimal SI
  (``0.5Ki`` → ``512``), as Go's ``CanonicalizeBytes`` does;
- precision finer than the scale (nano units; milli units for resource lists, as the real server's
  ``SetDefaults_ResourceList`` rounds them) is rounded up (``0.1n`` → ``1n``, cpu ``100u`` → ``1m``).
A malformed quantity raises ``ValueError`` with the real decoder's message.

Not promised: values beyond the ``E`` (10^18 / 2^60) suffixes are written as a mantissa with ``E``/``Ei``.
"""

from __future__ import annotations

import math
import re
from fractions import Fraction

QUANTITY_PATTERN = r"^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$"
MALFORMED = f"quantities must match the regular expression '{QUANTITY_PATTERN}'"

_NUMBER = re.compile(r"^[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)$")
_BINARY = {"Ki": 1, "Mi": 2, "Gi": 3, "Ti": 4, "Pi": 5, "Ei": 6}
_DECIMAL = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}
_DECIMAL_SUFFIX = {exp: suffix for suffix, exp in _DECIMAL.items()}
_BINARY_SUFFIX = ["", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei"]
_EXPONENT = re.compile(r"^[eE]([-+]?[0-9]+)$")


def parse(value: object) -> tuple[Fraction, str]:
    """The exact value and the format (``binary``, ``decimal`` or ``exponent``) of a quantity."""
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        raise ValueError(MALFORMED)
    text = repr(value) if isinstance(value, float) else str(value)  # a JSON number is read as its text
    match = re.match(r"^([+-]?[0-9.]+)(.*)$", text)
    if match is None or not _NUMBER.match(match.group(1)):
        raise ValueError(MALFORMED)
    number, suffix = Fraction(match.group(1)), match.group(2)
    if suffix in _BINARY:
        return number * 1024 ** _BINARY[suffix], "binary"
    if suffix in _DECIMAL:
        return number * Fraction(10) ** _DECIMAL[suffix], "decimal"
    exponent = _EXPONENT.match(suffix)
    if exponent is not None:
        return number * Fraction(10) ** int(exponent.group(1)), "exponent"
    raise ValueError(MALFORMED)


def canonical(value: object, *, scale: int = -9) -> str:
    """The canonical string of a quantity (module contract), rounded up to ``10^scale`` units (a
    multiple of 3: -9 for a plain quantity, -3 for the values of a resource list)."""
    amount, fmt = parse(value)
    units = amount / Fraction(10) ** scale
    rounded = math.ceil(units) if units >= 0 else -math.ceil(-units)  # away from zero, as Go rounds up
    exact = Fraction(rounded) * Fraction(10) ** scale
    if fmt == "binary" and (abs(exact) < 1024 or exact.denominator != 1):
        fmt = "decimal"
    sign = "-" if exact < 0 else ""
    if fmt == "binary":
        whole, power = abs(int(exact)), 0
        while whole and whole % 1024 == 0 and power < len(_BINARY_SUFFIX) - 1:
            whole //= 1024
            power += 1
        return f"{sign}{whole}{_BINARY_SUFFIX[power]}"
    magnitude = abs(rounded)
    if magnitude == 0:
        return "0"
    exponent = scale
    while magnitude % 1000 == 0 and exponent < 18:
        magnitude //= 1000
        exponent += 3
    if fmt == "exponent":
        return f"{sign}{magnitude}" + (f"e{exponent}" if exponent else "")
    return f"{sign}{magnitude}{_DECIMAL_SUFFIX[exponent]}"
