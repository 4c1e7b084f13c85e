"""Shamir secret sharing over GF(2^8), as sops (HashiCorp Vault's implementation) splits the
data key between key groups.

A share is ``y-bytes + x`` (the last byte is the x coordinate, 1-based). ``combine`` interpolates
each byte at x = 0. It needs at least two shares with distinct x coordinates and equal lengths;
it cannot tell a wrong share from a right one — a wrong data key is caught later by AES-GCM.
"""

from __future__ import annotations

from collections.abc import Sequence

from kustomize_controller.kustomize.sops.errors import SopsKeyError


def _mult(a: int, b: int) -> int:
    # Russian-peasant multiplication modulo x^8 + x^4 + x^3 + x + 1 (0x11B).
    result = 0
    for _ in range(8):
        if b & 1:
            result ^= a
        carry = a & 0x80
        a = (a << 1) & 0xFF
        if carry:
            a ^= 0x1B
        b >>= 1
    return result


def _inverse(a: int) -> int:
    # a^254 = a^-1 in GF(2^8)
    result = 1
    for _ in range(254):
        result = _mult(result, a)
    return result


def combine(parts: Sequence[bytes]) -> bytes:
    if len(parts) < 2:
        raise SopsKeyError("could not get data key from shamir parts: less than two parts cannot be used")
    length = len(parts[0])
    if length < 2:
        raise SopsKeyError("could not get data key from shamir parts: parts must be at least two bytes")
    if any(len(p) != length for p in parts):
        raise SopsKeyError("could not get data key from shamir parts: all parts must be the same length")
    xs = [p[-1] for p in parts]
    if len(set(xs)) != len(xs) or 0 in xs:
        raise SopsKeyError("could not get data key from shamir parts: duplicate part detected")
    # Lagrange basis values at x = 0 are the same for every byte position.
    basis: list[int] = []
    for i, xi in enumerate(xs):
        value = 1
        for j, xj in enumerate(xs):
            if i != j:
                value = _mult(value, _mult(xj, _inverse(xi ^ xj)))
        basis.append(value)
    secret = bytearray()
    for index in range(length - 1):
        byte = 0
        for part, b in zip(parts, basis, strict=True):
            byte ^= _mult(part[index], b)
        secret.append(byte)
    return bytes(secret)
