"""What keeps the UI safe to leave open: it acts with the user's credentials, so only the user's own pages may
make it act.

Contract (each tried by a test, ``docs/ui.md`` "Security model"):
- **Host**: a request whose ``Host`` header is not an address the server was bound to (by default only
  ``127.0.0.1:PORT``, ``localhost:PORT``, ``[::1]:PORT``) is refused with 421: a page on another site whose
  name was re-pointed at 127.0.0.1 (DNS rebinding) never gets an answer.
- **Session**: the first answer sets a session cookie (random, signed with a per-process secret, HttpOnly,
  ``SameSite=Strict``); the CSRF token is an HMAC of the session, so the server keeps no session state.
- **Actions**: every action is a POST that must carry an ``Origin`` of an allowed host (a missing Origin is
  refused: browsers send it with every POST) and the session's CSRF token (header ``X-CSRF-Token`` or form
  field ``csrf``). A GET never changes anything.
- **Headers** on every answer: a content security policy without inline scripts or styles
  (``default-src 'self'``), no framing, no MIME sniffing, no referrer to other sites, no caching of pages.
Not promised: protection from software running as the same user on the same machine (it can read the
kubeconfig itself), nor from anyone who can reach a non-loopback address the user chose to bind.
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import secrets
from collections.abc import Iterable, Mapping

SESSION_COOKIE = "kc_ui_session"
CSRF_HEADER = "X-CSRF-Token"
CSRF_FIELD = "csrf"
CSP = ("default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
       "object-src 'none'; base-uri 'none'; frame-ancestors 'none'; form-action 'self'")
HEADERS: Mapping[str, str] = {
    "Content-Security-Policy": CSP,
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "same-origin",
    "Cross-Origin-Opener-Policy": "same-origin",
    "Cross-Origin-Resource-Policy": "same-origin",
}
LOOPBACK_NAMES = ("127.0.0.1", "localhost", "[::1]")


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def allowed_hosts(bind_host: str, port: int, *, extra: Iterable[str] = ()) -> frozenset[str]:
    """The ``Host`` values the server answers: the loopback names, the bound address, and ``extra`` names."""
    bound = f"[{bind_host}]" if ":" in bind_host and not bind_host.startswith("[") else bind_host
    names = {*LOOPBACK_NAMES, bound, *extra} if is_loopback(bind_host) or bind_host in ("0.0.0.0", "::") \
        else {bound, *extra}
    names.discard("0.0.0.0")
    names.discard("[::]")
    return frozenset(f"{name}:{port}" for name in names)


class Sessions:
    """Signed session ids and their CSRF tokens (module contract); the secret lives and dies with the process."""

    def __init__(self, secret: bytes | None = None) -> None:
        self._secret = secret or secrets.token_bytes(32)

    def _sign(self, purpose: str, value: str) -> str:
        return hmac.new(self._secret, f"{purpose}:{value}".encode(), hashlib.sha256).hexdigest()

    def new(self) -> str:
        nonce = secrets.token_urlsafe(24)
        return f"{nonce}.{self._sign('session', nonce)}"

    def valid(self, session: str | None) -> bool:
        if not session or "." not in session:
            return False
        nonce, _, signature = session.partition(".")
        return hmac.compare_digest(signature, self._sign("session", nonce))

    def csrf_token(self, session: str) -> str:
        return self._sign("csrf", session)

    def csrf_ok(self, session: str | None, token: str | None) -> bool:
        return bool(session and token and self.valid(session)
                    and hmac.compare_digest(token, self.csrf_token(session)))


def host_allowed(host: str | None, allowed: frozenset[str]) -> bool:
    return bool(host) and host in allowed


def origin_allowed(origin: str | None, allowed: frozenset[str]) -> bool:
    """``Origin`` is ``http://`` and an allowed host (``null``, another scheme, another host or none: refused)."""
    return bool(origin) and origin is not None and origin.startswith("http://") and \
        origin.removeprefix("http://") in allowed
