from aiohttp.test_utils import make_mocked_request

from kustomize_controller.runtime.health import CheckSet, Probes


def failing() -> None:
    raise RuntimeError("not synced")


async def passing_async() -> None:
    return None


async def test_all_pass_is_plain_ok() -> None:
    checks = CheckSet("readyz")
    checks.add("b", passing_async)
    checks.add("a", lambda: None)
    assert await checks.evaluate() == (True, "ok")
    assert await checks.evaluate(verbose=True) == (True, "[+]a ok\n[+]b ok\nhealthz check passed\n")


async def test_failure_lists_every_check_sorted_and_withholds_reasons() -> None:
    checks = CheckSet("readyz")
    checks.add("ping", lambda: None)
    checks.add("informers", failing)
    healthy, body = await checks.evaluate()
    assert not healthy
    assert body == "[-]informers failed: reason withheld\n[+]ping ok\nhealthz check failed\n"
    assert "not synced" not in body


async def test_exclude() -> None:
    checks = CheckSet("readyz")
    checks.add("ping", lambda: None)
    checks.add("informers", failing)
    assert await checks.evaluate(exclude=["informers"]) == (True, "ok")
    healthy, body = await checks.evaluate(exclude=["informers", "nope"], verbose=True)
    assert healthy
    assert body == (
        "[+]informers excluded: ok\n[+]ping ok\n"
        'warn: some health checks cannot be excluded: no matches for "nope"\nhealthz check passed\n'
    )


async def test_implicit_ping_when_empty() -> None:
    assert await CheckSet("healthz").evaluate(verbose=True) == (True, "[+]ping ok\nhealthz check passed\n")


async def test_http_handlers() -> None:
    probes = Probes()
    probes.add_readyz_check("informers", failing)
    resp = await probes.readyz.handle(make_mocked_request("GET", "/readyz"))
    assert resp.status == 500
    assert resp.headers["Content-Type"] == "text/plain; charset=utf-8"
    assert resp.headers["X-Content-Type-Options"] == "nosniff"
    ok = await probes.healthz.handle(make_mocked_request("GET", "/healthz"))
    assert (ok.status, ok.body) == (200, b"ok")
    one = await probes.readyz.handle_one(
        make_mocked_request("GET", "/readyz/informers", match_info={"check": "informers"})
    )
    assert (one.status, one.body) == (500, b"internal server error: not synced\n")
    missing = await probes.readyz.handle_one(make_mocked_request("GET", "/readyz/x", match_info={"check": "x"}))
    assert missing.status == 404
