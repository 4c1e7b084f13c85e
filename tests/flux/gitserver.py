"""A Git server on loopback speaking smart HTTP, for source-controller to clone from.

``git http-backend`` (part of every git installation) does the protocol; a small aiohttp handler runs it
as a CGI program per request. Repositories are bare, under a temporary directory the server owns and
removes on exit; each has a working clone the test commits into (``Repository.commit``), pushed to the bare
repository over the file system. Only fetches are served over HTTP (``git-upload-pack``); nobody pushes
over HTTP.

    async with GitServer() as git:
        repo = await git.create("app")                 # an empty repository, branch main
        sha = await repo.commit({"kustomization.yaml": "...", "cm.yaml": "..."})
        repo.url                                       # http://127.0.0.1:PORT/app.git
        repo.revision(sha)                             # "main@sha1:<sha>", as source-controller writes it
        repo.worktree                                  # the checkout (flux build/diff --path)

Commits have a fixed author and committer and a time that advances one second per commit from a fixed
start, so the same sequence of commits gives the same SHAs in every run and every repository.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from aiohttp import web

from .process import communicate
from .served import LoopbackServer

_GIT_TIMEOUT = 30.0
_EPOCH = 1_700_000_000  # the first commit's time; each commit one second later
_PASSED_HEADERS = ("Content-Encoding", "Git-Protocol", "Accept", "User-Agent")


class GitError(RuntimeError):
    """A git command failed; the message has its output."""


def _git_env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env.update(GIT_CONFIG_NOSYSTEM="1", GIT_CONFIG_GLOBAL=os.devnull, GIT_TERMINAL_PROMPT="0",
               GIT_AUTHOR_NAME="e2e", GIT_AUTHOR_EMAIL="e2e@example.com",
               GIT_COMMITTER_NAME="e2e", GIT_COMMITTER_EMAIL="e2e@example.com")
    env.update(extra or {})
    return env


async def git(*args: str, cwd: Path, env: Mapping[str, str] | None = None, stdin: bytes | None = None) -> bytes:
    """Run ``git ARGS`` in ``cwd``; its stdout, or ``GitError`` on a non-zero exit or after 30 s."""
    try:
        code, out, err = await communicate(["git", *args], within=_GIT_TIMEOUT, stdin=stdin, env=_git_env(env),
                                           cwd=cwd)
    except TimeoutError as exc:
        raise GitError(str(exc)) from None
    if code != 0:
        raise GitError(f"git {' '.join(args)}: exit {code}: {err.decode(errors='replace').strip()}")
    return out


@dataclass
class Repository:
    """One repository: ``bare`` (served) and ``worktree`` (committed into), branch ``branch``."""

    name: str
    url: str
    bare: Path
    worktree: Path
    branch: str = "main"
    commits: int = 0

    def revision(self, sha: str) -> str:
        """The revision source-controller gives a commit of the branch: ``<branch>@sha1:<sha>``."""
        return f"{self.branch}@sha1:{sha}"

    async def commit(self, files: Mapping[str, str | bytes | None], *, message: str = "",
                     replace: bool = False) -> str:
        """Write ``files`` (path relative to the root: text or bytes; ``None`` removes the file), commit
        everything and push; returns the commit's SHA. ``replace`` first removes every tracked file."""
        if replace:
            for path in (await git("ls-files", "-z", cwd=self.worktree)).split(b"\0"):
                if path:
                    (self.worktree / path.decode()).unlink(missing_ok=True)
        for rel, content in files.items():
            target = self.worktree / rel
            if content is None:
                target.unlink(missing_ok=True)
                continue
            target.parent.mkdir(parents=True, exist_ok=True)
            if isinstance(content, bytes):
                target.write_bytes(content)
            else:
                target.write_text(content)
        self.commits += 1
        when = f"@{_EPOCH + self.commits} +0000"
        await git("add", "--all", cwd=self.worktree)
        await git("commit", "--allow-empty", "--quiet", "-m", message or f"commit {self.commits}",
                  cwd=self.worktree, env={"GIT_AUTHOR_DATE": when, "GIT_COMMITTER_DATE": when})
        await git("push", "--quiet", "origin", f"HEAD:refs/heads/{self.branch}", cwd=self.worktree)
        return await self.head()

    async def head(self) -> str:
        return (await git("rev-parse", "HEAD", cwd=self.worktree)).decode().strip()

    async def tag(self, name: str) -> None:
        await git("tag", "--force", name, cwd=self.worktree)
        await git("push", "--quiet", "--force", "origin", f"refs/tags/{name}", cwd=self.worktree)


@dataclass
class GitServer(LoopbackServer):
    """Smart-HTTP Git server on ``127.0.0.1`` (module contract). ``requests`` counts requests per
    repository name (``info/refs`` and ``git-upload-pack`` alike)."""

    root: Path | None = None
    requests: dict[str, int] = field(default_factory=dict)
    _owned_root: bool = False

    @property
    def url(self) -> str:
        return self.base_url

    def app(self) -> web.Application:
        app = web.Application(client_max_size=64 << 20)
        app.router.add_route("*", "/{path:.*}", self._handle)
        return app

    async def start(self) -> None:
        if self.root is None:
            self.root = Path(tempfile.mkdtemp(prefix="kc-gitserver-"))
            self._owned_root = True
        (self.root / "repos").mkdir(parents=True, exist_ok=True)
        (self.root / "work").mkdir(parents=True, exist_ok=True)
        await super().start()

    async def stop(self) -> None:
        await super().stop()
        if self.root is not None and self._owned_root:
            shutil.rmtree(self.root, ignore_errors=True)
            self.root = None
            self._owned_root = False

    async def create(self, name: str, *, branch: str = "main") -> Repository:
        """An empty repository ``<name>.git`` with a working clone; commit into it to fill it."""
        assert self.root is not None, "the server is not started"
        bare = self.root / "repos" / f"{name}.git"
        worktree = self.root / "work" / name
        await git("init", "--quiet", "--bare", f"--initial-branch={branch}", str(bare), cwd=self.root)
        await git("config", "http.uploadpack", "true", cwd=bare)
        await git("clone", "--quiet", str(bare), str(worktree), cwd=self.root)
        await git("checkout", "--quiet", "-B", branch, cwd=worktree)
        return Repository(name=name, url=f"{self.url}/{name}.git", bare=bare, worktree=worktree, branch=branch)

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        assert self.root is not None
        path = "/" + request.match_info["path"]
        repo = path.lstrip("/").split(".git/", 1)[0]
        self.requests[repo] = self.requests.get(repo, 0) + 1
        if path.endswith("/git-receive-pack") or request.query.get("service") == "git-receive-pack":
            return web.Response(status=403, text="push over HTTP is not served\n")
        body = await request.read()
        env = {"GIT_PROJECT_ROOT": str(self.root / "repos"), "GIT_HTTP_EXPORT_ALL": "1",
               "PATH_INFO": path, "REQUEST_METHOD": request.method, "QUERY_STRING": request.query_string,
               "CONTENT_TYPE": request.headers.get("Content-Type", ""), "CONTENT_LENGTH": str(len(body)),
               "REMOTE_ADDR": request.remote or "", "SERVER_PROTOCOL": "HTTP/1.1"}
        for header in _PASSED_HEADERS:
            if header in request.headers:
                env["HTTP_" + header.upper().replace("-", "_")] = request.headers[header]
        try:
            _, out, err = await communicate(["git", "http-backend"], within=_GIT_TIMEOUT, stdin=body,
                                            env=_git_env(env))
        except TimeoutError:
            return web.Response(status=504, text="git http-backend timed out\n")
        return _cgi_response(out, err)


def _cgi_response(out: bytes, err: bytes) -> web.Response:
    """A CGI program's output (headers, a blank line, the body) as an HTTP response."""
    head, sep, body = out.partition(b"\r\n\r\n")
    if not sep:
        head, sep, body = out.partition(b"\n\n")
    if not sep:
        return web.Response(status=500, text=f"git http-backend: no headers: {err.decode(errors='replace')}\n")
    status = 200
    headers: dict[str, str] = {}
    for line in head.decode("latin-1").splitlines():
        name, _, value = line.partition(":")
        if name.lower() == "status":
            status = int(value.strip().split()[0])
        elif name:
            headers[name.strip()] = value.strip()
    return web.Response(status=status, body=body, headers=headers)
