"""ServiceAccount tokens: the ``serviceaccounts/token`` subresource (TokenRequest), as a
kube-apiserver v1.36 answers it (docs/testing.md, "ServiceAccount tokens").

Contract:
- In the order a real server takes (checked against kube-apiserver v1.36.3): ``TokenIssuer.check_name(body,
  name=, namespace=)`` decodes the body and checks a ``metadata.name`` it sets against the path (422) and a
  ``metadata.namespace`` against the request's (400); the caller reads the ServiceAccount (404 as for a GET,
  before any validation of the spec); ``create(service_account, namespace, body, now, manager=)`` validates
  (``expirationSeconds`` 600..2^32, default 3600; audiences default to the server's own; 422) and answers
  the TokenRequest with the request's metadata completed as the real one is — the ServiceAccount's name,
  namespace and ``uid``, ``creationTimestamp`` now, a ``managedFields`` entry (``Update`` by the caller's
  field manager, subresource ``token``, the fields it sent after defaulting) — and ``status.token``,
  ``status.expirationTimestamp``. Nothing is stored and no watch event is sent.
- Tokens are RS256 JWTs signed with a key generated on first use (``public_key_pem`` exposes it,
  for tests that verify), with the claims of a real server: ``iss``, ``sub``
  (``system:serviceaccount:<ns>:<name>``), ``aud`` (a list), ``exp``, ``iat``, ``nbf``, ``jti`` and
  ``kubernetes.io`` (namespace, serviceaccount name and uid).
- Not done: ``boundObjectRef`` (400: no Pods or Nodes here), ``--service-account-max-token-expiration``,
  and TokenReview (these tokens do not authenticate requests to this server).
"""

from __future__ import annotations

import base64
import hashlib
import json
import uuid
from datetime import datetime, timedelta
from typing import Any

from . import errors, objects
from .kinds import ResourceType
from .patch.fieldsets import encode, fields_of

ISSUER = "https://kubernetes.default.svc.cluster.local"
#: for the field set of the answer's managedFields (audiences is an atomic list: the default)
_TOKEN_REQUEST = ResourceType(group="authentication.k8s.io", version="v1", kind="TokenRequest",
                              plural="tokenrequests", namespaced=True)
DEFAULT_EXPIRATION = 3600
MIN_EXPIRATION = 600
MAX_EXPIRATION = 1 << 32
GROUP = "authentication.k8s.io"


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


class TokenIssuer:
    def __init__(self, *, issuer: str = ISSUER, audiences: tuple[str, ...] = (ISSUER,)) -> None:
        self.issuer = issuer
        self.audiences = audiences
        self._key: Any = None
        self._kid = ""

    def _signing_key(self) -> Any:
        if self._key is None:
            from cryptography.hazmat.primitives import serialization
            from cryptography.hazmat.primitives.asymmetric import rsa

            self._key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
            der = self._key.public_key().public_bytes(
                serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)
            self._kid = _b64(hashlib.sha256(der).digest())
        return self._key

    @property
    def public_key_pem(self) -> bytes:
        from cryptography.hazmat.primitives import serialization

        return bytes(self._signing_key().public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo))

    def sign(self, claims: dict[str, Any]) -> str:
        from cryptography.hazmat.primitives import hashes
        from cryptography.hazmat.primitives.asymmetric import padding

        key = self._signing_key()
        header = {"alg": "RS256", "kid": self._kid}
        signing_input = f"{_b64(json.dumps(header, separators=(',', ':')).encode())}." \
                        f"{_b64(json.dumps(claims, separators=(',', ':')).encode())}"
        signature = key.sign(signing_input.encode(), padding.PKCS1v15(), hashes.SHA256())
        return f"{signing_input}.{_b64(signature)}"

    def check(self, body: Any) -> None:
        """Decode and validate a TokenRequest (raises ``ApiStatusError``: 400, 422)."""
        spec = _check_request(body).get("spec") or {}
        if spec.get("boundObjectRef"):
            raise errors.bad_request("the embedded API server cannot bind tokens to objects")
        expiration = spec.get("expirationSeconds", DEFAULT_EXPIRATION)
        if expiration is None:
            expiration = DEFAULT_EXPIRATION
        if not isinstance(expiration, int) or isinstance(expiration, bool):
            raise errors.bad_request(
                'TokenRequest in version "v1" cannot be handled as a TokenRequest: json: cannot unmarshal into '
                "Go struct field TokenRequestSpec.spec.expirationSeconds of type int64")
        problems = []
        if expiration < MIN_EXPIRATION:
            problems.append(errors.FieldError("spec.expirationSeconds", "Invalid value",
                                              "may not specify a duration less than 10 minutes", expiration))
        if expiration > MAX_EXPIRATION:
            problems.append(errors.FieldError("spec.expirationSeconds", "Invalid value",
                                              "may not specify a duration larger than 2^32 seconds", expiration))
        if problems:
            raise errors.invalid("TokenRequest", GROUP, "", problems)

    def check_name(self, body: Any, *, name: str, namespace: str) -> None:
        """The checks that come before the ServiceAccount is read: the body's name and namespace."""
        sent = _check_request(body).get("metadata")
        meta: dict[str, Any] = sent if isinstance(sent, dict) else {}
        if meta.get("namespace") and meta["namespace"] != namespace:
            raise errors.bad_request("the namespace of the provided object does not match the namespace sent on "
                                     "the request")
        if meta.get("name") and meta["name"] != name:
            raise errors.invalid("TokenRequest", GROUP, name, [errors.FieldError(
                "metadata.name", "Invalid value", "must match the service account name if specified", meta["name"])])

    def create(self, service_account: dict[str, Any], namespace: str, body: Any, now: datetime, *,
               manager: str = "unknown") -> dict[str, Any]:
        """The answer to a checked TokenRequest for ``service_account`` (already read)."""
        self.check(body)
        request = dict(body)
        spec = request.get("spec") or {}
        expiration = spec.get("expirationSeconds") or DEFAULT_EXPIRATION
        audiences = spec.get("audiences") or list(self.audiences)
        metadata = service_account["metadata"]
        sent_spec = {k: v for k, v in spec.items() if v is not None and k != "expirationSeconds"}
        issued = now.replace(microsecond=0)
        expires = issued + timedelta(seconds=expiration)
        claims = {
            "aud": list(audiences),
            "exp": int(expires.timestamp()),
            "iat": int(issued.timestamp()),
            "iss": self.issuer,
            "jti": str(uuid.uuid4()),
            "kubernetes.io": {
                "namespace": namespace,
                "serviceaccount": {"name": metadata["name"], "uid": metadata.get("uid", "")},
            },
            "nbf": int(issued.timestamp()),
            "sub": f"system:serviceaccount:{namespace}:{metadata['name']}",
        }
        sent = request.get("metadata")
        request_meta: dict[str, Any] = sent if isinstance(sent, dict) else {}
        owned = {k: v for k, v in request_meta.items() if k in ("labels", "annotations") and v}
        fields = encode(fields_of(_TOKEN_REQUEST, {"metadata": owned,
                                                   "spec": {**sent_spec, "expirationSeconds": expiration}}))
        stamp = objects.timestamp(now)
        return {
            "kind": "TokenRequest",
            "apiVersion": f"{GROUP}/v1",
            "metadata": {
                **request_meta, "name": metadata["name"], "namespace": namespace, "uid": metadata.get("uid", ""),
                "creationTimestamp": stamp,
                "managedFields": [{"manager": manager, "operation": "Update", "apiVersion": f"{GROUP}/v1",
                                   "time": stamp, "fieldsType": "FieldsV1", "fieldsV1": fields,
                                   "subresource": "token"}],
            },
            "spec": {"audiences": list(audiences), "expirationSeconds": expiration, "boundObjectRef": None},
            "status": {"token": self.sign(claims), "expirationTimestamp": objects.timestamp(expires)},
        }


def _check_request(body: Any) -> dict[str, Any]:
    if not isinstance(body, dict):
        raise errors.bad_request("the request body must be a JSON object")
    kind, api_version = body.get("kind"), body.get("apiVersion")
    if (kind not in (None, "TokenRequest")) or (api_version not in (None, f"{GROUP}/v1")):
        raise errors.bad_request(f"TokenRequest in version \"v1\" cannot be handled as a TokenRequest: "
                                 f"unexpected kind {kind!r} / apiVersion {api_version!r}")
    spec = body.get("spec")
    if spec is not None and not isinstance(spec, dict):
        raise errors.bad_request("TokenRequest in version \"v1\" cannot be handled as a TokenRequest: "
                                 "spec must be an object")
    return dict(body)
