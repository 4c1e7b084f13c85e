"""Unsigned JWTs with chosen claims, for tests that only need a token's payload read."""

from __future__ import annotations

import base64
import json
from typing import Any


def _segment(value: dict[str, Any]) -> str:
    return base64.urlsafe_b64encode(json.dumps(value).encode()).rstrip(b"=").decode()


def unsigned_jwt(claims: dict[str, Any]) -> str:
    return f"{_segment({'alg': 'none', 'typ': 'JWT'})}.{_segment(claims)}.c2lnbmF0dXJl"


def service_account_jwt(namespace: str, name: str, *, audience: str, exp: float, iat: float | None = None) -> str:
    return unsigned_jwt({
        "aud": [audience], "exp": int(exp), "iat": int(iat if iat is not None else exp - 3600),
        "iss": "https://kubernetes.default.svc.cluster.local",
        "sub": f"system:serviceaccount:{namespace}:{name}",
    })
