"""The UI's guards as pure functions: allowed Host values, Origin, signed sessions and their CSRF tokens, the
loud warning on a non-loopback address (kustomize_controller/ui/security.py, command.py)."""

from __future__ import annotations

import io

from kustomize_controller.ui import security
from kustomize_controller.ui.command import warn_if_exposed
from kustomize_controller.ui.server import UiOptions


def test_loopback_binds_answer_the_loopback_names_only() -> None:
    assert security.allowed_hosts("127.0.0.1", 9333) == {"127.0.0.1:9333", "localhost:9333", "[::1]:9333"}
    assert security.allowed_hosts("10.0.0.5", 80, extra=["ui.example"]) == {"10.0.0.5:80", "ui.example:80"}
    assert "0.0.0.0:1" not in security.allowed_hosts("0.0.0.0", 1)


def test_origin_must_be_an_allowed_http_origin() -> None:
    allowed = security.allowed_hosts("127.0.0.1", 9333)
    assert security.origin_allowed("http://127.0.0.1:9333", allowed)
    for origin in (None, "", "null", "http://evil.example", "https://127.0.0.1:9333", "http://127.0.0.1:9334"):
        assert not security.origin_allowed(origin, allowed), origin


def test_sessions_are_signed_and_tokens_bound_to_them() -> None:
    sessions = security.Sessions()
    session = sessions.new()
    assert sessions.valid(session) and not sessions.valid(session + "x") and not sessions.valid("forged.sig")
    assert not security.Sessions().valid(session)  # another process's secret
    token = sessions.csrf_token(session)
    assert sessions.csrf_ok(session, token)
    assert not sessions.csrf_ok(sessions.new(), token) and not sessions.csrf_ok(session, "") and \
        not sessions.csrf_ok(None, token)


def test_the_policy_has_no_inline_scripts_or_styles() -> None:
    assert "'unsafe-inline'" not in security.CSP and "'unsafe-eval'" not in security.CSP
    assert "default-src 'self'" in security.CSP and "frame-ancestors 'none'" in security.CSP


def test_a_non_loopback_address_is_announced_loudly() -> None:
    err = io.StringIO()
    warn_if_exposed(UiOptions(host="127.0.0.1"), "http://127.0.0.1:9333", err)
    assert err.getvalue() == ""
    warn_if_exposed(UiOptions(host="0.0.0.0"), "http://127.0.0.1:9333", err)
    assert "ANYONE WHO CAN REACH THIS ADDRESS" in err.getvalue() and "YOUR CREDENTIALS" in err.getvalue()
