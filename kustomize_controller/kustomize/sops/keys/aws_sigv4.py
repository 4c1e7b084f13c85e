"""AWS Signature Version 4 for the few AWS calls the key service makes (KMS Decrypt, STS).

Contract: :func:`sign` returns the headers to add to a request (``X-Amz-Date``,
``Authorization``, ``X-Amz-Security-Token`` for temporary credentials) for ``method url body``
and the given headers, all of which are signed. URLs are expected without a query string (the
calls we sign send their parameters in the body). The secret key is only an HMAC key here.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Mapping
from datetime import datetime
from urllib.parse import quote, urlsplit

from kustomize_controller.kustomize.sops.keys.credentials import AwsCredentials

ALGORITHM = "AWS4-HMAC-SHA256"


def _hmac(key: bytes, text: str) -> bytes:
    return hmac.new(key, text.encode(), hashlib.sha256).digest()


def sign(
    *,
    method: str,
    url: str,
    headers: Mapping[str, str],
    body: bytes,
    credentials: AwsCredentials,
    region: str,
    service: str,
    now: datetime,
) -> dict[str, str]:
    parts = urlsplit(url)
    amz_date = now.strftime("%Y%m%dT%H%M%SZ")
    day = amz_date[:8]
    added = {"X-Amz-Date": amz_date}
    if credentials.session_token:
        added["X-Amz-Security-Token"] = credentials.session_token
    signed = {k.lower(): " ".join(str(v).split()) for k, v in {**headers, **added}.items()}
    signed["host"] = parts.netloc
    names = sorted(signed)
    canonical = "\n".join(
        [
            method,
            quote(parts.path or "/", safe="/~"),
            "",
            "".join(f"{name}:{signed[name]}\n" for name in names),
            ";".join(names),
            hashlib.sha256(body).hexdigest(),
        ]
    )
    scope = f"{day}/{region}/{service}/aws4_request"
    to_sign = "\n".join([ALGORITHM, amz_date, scope, hashlib.sha256(canonical.encode()).hexdigest()])
    key = _hmac(("AWS4" + credentials.secret_access_key).encode(), day)
    for part in (region, service, "aws4_request"):
        key = _hmac(key, part)
    signature = hmac.new(key, to_sign.encode(), hashlib.sha256).hexdigest()
    added["Authorization"] = (
        f"{ALGORITHM} Credential={credentials.access_key_id}/{scope}, "
        f"SignedHeaders={';'.join(names)}, Signature={signature}"
    )
    return added
