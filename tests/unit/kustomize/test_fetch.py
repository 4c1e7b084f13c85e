"""Artifact download against a local aiohttp server: digests, retries with backoff, limits, host override."""

from __future__ import annotations

import asyncio
import hashlib
import socket
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from aiohttp import web

from kustomize_controller.kustomize.errors import (
    ArtifactNotFoundError,
    ArtifactTooLargeError,
    DigestError,
    DownloadError,
    KustomizeError,
)
from kustomize_controller.kustomize.fetch import (
    ArtifactFetcher,
    Digest,
    host_override_from_env,
    override_host,
    retry_after_seconds,
)
from kustomize_controller.runtime.clock import FakeClock
from tests.loopback import serve

BODY = b"artifact-bytes" * 1000
SHA256 = hashlib.sha256(BODY).hexdigest()


class RecordingClock(FakeClock):
    def __init__(self) -> None:
        super().__init__()
        self.sleeps: list[float] = []

    async def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        await super().sleep(seconds)


@dataclass
class Server:
    url: str
    port: int
    requests: list[str] = field(default_factory=list)
    plan: list[Callable[[], web.StreamResponse]] = field(default_factory=list)


def ok(body: bytes = BODY) -> Callable[[], web.StreamResponse]:
    return lambda: web.Response(body=body)


def status(code: int, headers: dict[str, str] | None = None) -> Callable[[], web.StreamResponse]:
    return lambda: web.Response(status=code, headers=headers)


@pytest.fixture
async def server() -> AsyncIterator[Server]:
    srv = Server(url="", port=0)

    async def handler(request: web.Request) -> web.StreamResponse:
        srv.requests.append(request.path)
        if request.path == "/chunked":
            resp = web.StreamResponse()
            await resp.prepare(request)
            for _ in range(10):
                await resp.write(b"x" * 1000)
            await resp.write_eof()
            return resp
        make = srv.plan.pop(0) if srv.plan else ok()
        return make()

    app = web.Application()
    app.router.add_get("/{tail:.*}", handler)
    runner, srv.url = await serve(app)
    srv.port = int(srv.url.rsplit(":", 1)[1])
    try:
        yield srv
    finally:
        await runner.cleanup()


@pytest.fixture
async def session() -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession() as s:
        yield s


async def drive(clock: FakeClock, coro: Any) -> Any:
    """Run ``coro``, stepping the fake clock whenever the fetcher waits on it."""
    task = asyncio.ensure_future(coro)
    while not task.done():
        if clock.pending_sleepers:
            await clock.advance(60)
        else:
            await asyncio.wait([task], timeout=0.05)
    return task.result()


def fetcher(session: aiohttp.ClientSession, clock: FakeClock, **kw: Any) -> ArtifactFetcher:
    return ArtifactFetcher(session=session, clock=clock, env={}, **kw)


@pytest.mark.parametrize(
    "digest",
    [f"sha256:{SHA256}", SHA256, f"sha512:{hashlib.sha512(BODY).hexdigest()}"],
)
async def test_download_verifies_digest(server: Server, session: aiohttp.ClientSession, tmp_path: Path,
                                        digest: str) -> None:
    clock = RecordingClock()
    n = await drive(clock, fetcher(session, clock).fetch(f"{server.url}/a.tgz", digest, tmp_path / "a"))
    assert n == len(BODY)
    assert (tmp_path / "a").read_bytes() == BODY
    assert clock.sleeps == []


async def test_digest_mismatch_in_upstreams_words(server: Server, session: aiohttp.ClientSession,
                                                  tmp_path: Path) -> None:
    clock = RecordingClock()
    wrong = "0" * 64
    with pytest.raises(DigestError) as err:
        await drive(clock, fetcher(session, clock).fetch(f"{server.url}/a.tgz", wrong, tmp_path / "a"))
    assert str(err.value) == (  # as kustomize-controller v1.9.4 writes it (found by the differential run)
        f"failed to verify archive: computed digest doesn't match provided 'sha256:{wrong}' "
        "(check whether file size exceeds max download size)"
    )
    assert err.value.reason == "ArtifactFailed"


@pytest.mark.parametrize(
    ("digest", "message"),
    [
        ("", "failed to verify archive: empty digest"),
        ("blake3:" + "0" * 64, "unsupported digest algorithm"),
        ("sha256:xyz", "invalid checksum digest format"),
        ("md5:" + "0" * 32, "unsupported digest algorithm"),
    ],
)
def test_bad_digests(digest: str, message: str) -> None:
    with pytest.raises(DigestError, match=message):
        Digest.parse(digest)


async def test_404_is_artifact_not_found_without_retry(server: Server, session: aiohttp.ClientSession,
                                                       tmp_path: Path) -> None:
    server.plan = [status(404)]
    clock = RecordingClock()
    with pytest.raises(ArtifactNotFoundError):
        await drive(clock, fetcher(session, clock).fetch(f"{server.url}/gone", SHA256, tmp_path / "a"))
    assert len(server.requests) == 1 and clock.sleeps == []


async def test_5xx_is_retried_with_exponential_backoff(server: Server, session: aiohttp.ClientSession,
                                                       tmp_path: Path) -> None:
    server.plan = [status(500), status(502), status(503)]
    clock = RecordingClock()
    await drive(clock, fetcher(session, clock).fetch(f"{server.url}/a", SHA256, tmp_path / "a"))
    assert clock.sleeps == [5.0, 10.0, 20.0]
    assert len(server.requests) == 4


async def test_gives_up_after_retries_with_capped_backoff(server: Server, session: aiohttp.ClientSession,
                                                          tmp_path: Path) -> None:
    server.plan = [status(503)] * 10
    clock = RecordingClock()
    with pytest.raises(DownloadError) as err:
        await drive(clock, fetcher(session, clock, retries=5).fetch(f"{server.url}/a", SHA256, tmp_path / "a"))
    assert str(err.value) == f"failed to download archive: GET {server.url}/a giving up after 6 attempt(s)"
    assert clock.sleeps == [5.0, 10.0, 20.0, 30.0, 30.0]


async def test_retry_after_is_honoured(server: Server, session: aiohttp.ClientSession, tmp_path: Path) -> None:
    server.plan = [status(429, {"Retry-After": "7"}), status(503, {"Retry-After": "120"})]
    clock = RecordingClock()
    await drive(clock, fetcher(session, clock).fetch(f"{server.url}/a", SHA256, tmp_path / "a"))
    assert clock.sleeps == [7.0, 30.0]


async def test_a_retry_after_of_non_ascii_digits_is_ignored(server: Server, session: aiohttp.ClientSession,
                                                             tmp_path: Path) -> None:
    # found by fuzzing: "²".isdigit() is true and float("²") raised a ValueError out of fetch
    server.plan = [status(503, {"Retry-After": "²"})]
    clock = RecordingClock()
    await drive(clock, fetcher(session, clock).fetch(f"{server.url}/a", SHA256, tmp_path / "a"))
    assert clock.sleeps == [5.0]


@pytest.mark.parametrize(("code", "text"), [(400, "400 Bad Request"), (403, "403 Forbidden"),
                                            (501, "501 Not Implemented")])
async def test_other_codes_fail_without_retry(server: Server, session: aiohttp.ClientSession, tmp_path: Path,
                                              code: int, text: str) -> None:
    server.plan = [status(code)]
    clock = RecordingClock()
    with pytest.raises(DownloadError) as err:
        await drive(clock, fetcher(session, clock).fetch(f"{server.url}/a", SHA256, tmp_path / "a"))
    assert str(err.value) == f"failed to download archive from {server.url}/a (status: {text})"
    assert clock.sleeps == []


async def test_connection_errors_are_retried(session: aiohttp.ClientSession, tmp_path: Path) -> None:
    clock = RecordingClock()
    with socket.socket() as sock:  # a port that was free a moment ago: nothing listens there now
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    url = f"http://127.0.0.1:{port}/a.tgz"
    with pytest.raises(DownloadError, match=r"giving up after 3 attempt\(s\): ClientConnectorError"):
        await drive(clock, fetcher(session, clock, retries=2).fetch(url, SHA256, tmp_path / "a"))
    assert clock.sleeps == [5.0, 10.0]


async def test_size_limit_by_content_length(server: Server, session: aiohttp.ClientSession, tmp_path: Path) -> None:
    clock = RecordingClock()
    with pytest.raises(ArtifactTooLargeError, match="greater than the max download size of 100 bytes"):
        await drive(clock, fetcher(session, clock, max_size=100).fetch(f"{server.url}/a", SHA256, tmp_path / "a"))


async def test_size_limit_while_streaming(server: Server, session: aiohttp.ClientSession, tmp_path: Path) -> None:
    clock = RecordingClock()
    with pytest.raises(ArtifactTooLargeError):
        await drive(
            clock, fetcher(session, clock, max_size=5000).fetch(f"{server.url}/chunked", SHA256, tmp_path / "a")
        )
    assert (tmp_path / "a").stat().st_size <= 5000


async def test_host_override(server: Server, session: aiohttp.ClientSession, tmp_path: Path) -> None:
    clock = RecordingClock()
    env = {"SOURCE_CONTROLLER_LOCALHOST": f"127.0.0.1:{server.port}"}
    f = ArtifactFetcher(session=session, clock=clock, env=env)
    url = "http://source-controller.flux-system.svc.cluster.local./gitrepository/ns/name/abc.tar.gz"
    await drive(clock, f.fetch(url, SHA256, tmp_path / "a"))
    assert server.requests == ["/gitrepository/ns/name/abc.tar.gz"]


def test_host_override_selection() -> None:
    env = {"SOURCE_CONTROLLER_LOCALHOST": "sc:9090", "SOURCE_WATCHER_LOCALHOST": "sw:9091"}
    assert host_override_from_env("http://source-controller.x/a", env) == "sc:9090"
    assert host_override_from_env("http://source-watcher.x/a", env) == "sw:9091"
    assert host_override_from_env("http://x/a", {}) is None
    assert override_host("http://a.b:80/p?q=1", "localhost:8080") == "http://localhost:8080/p?q=1"
    assert override_host("http://a.b/p", None) == "http://a.b/p"


def test_error_tree_reasons() -> None:
    assert issubclass(ArtifactNotFoundError, KustomizeError)
    assert ArtifactNotFoundError("u").reason == DownloadError("x").reason == "ArtifactFailed"



@pytest.mark.parametrize(
    ("value", "seconds"), [("7", 7.0), ("0", 0.0), ("²", None), ("٣", None), ("1.5", None), ("", None), (None, None),
                           ("Wed, 21 Oct 2015 07:28:00 GMT", None)],
)
def test_retry_after_takes_ascii_delta_seconds_only(value: str | None, seconds: float | None) -> None:
    # found by fuzzing: str.isdigit() is true for "²", which float() refuses (a ValueError out of fetch)
    assert retry_after_seconds(value) == seconds
