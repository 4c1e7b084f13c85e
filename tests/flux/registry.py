"""An OCI distribution registry on loopback (plain HTTP), enough for ``flux push artifact`` and
source-controller's ``OCIRepository`` (go-containerregistry on both sides).

What it serves (the distribution spec's pull and push endpoints, in memory, no authentication):

- ``GET /v2/`` — 200, the API check;
- blobs: ``HEAD``/``GET /v2/<name>/blobs/<digest>``; uploads started with ``POST /v2/<name>/blobs/uploads/``
  (monolithic with ``?digest=``; a ``?mount=`` is answered with a fresh upload, as registries that do not
  mount do), continued with ``PATCH`` and finished with ``PUT ...?digest=`` (the digest is checked);
- manifests: ``PUT``/``HEAD``/``GET /v2/<name>/manifests/<tag or digest>`` (served with the media type
  they were pushed with and ``Docker-Content-Digest``), ``DELETE`` by tag;
- ``GET /v2/<name>/tags/list``.

Unknown names, blobs and manifests answer 404 with the spec's error body. Repository names may hold
slashes. ``pulls`` counts manifest GETs per ``name:reference``.

    async with OciRegistry() as registry:
        registry.host                 # "127.0.0.1:PORT" (go-containerregistry speaks plain HTTP to loopback)
        registry.url("app")           # "oci://127.0.0.1:PORT/app"
"""

from __future__ import annotations

import hashlib
import json
import re
import uuid
from dataclasses import dataclass, field

from aiohttp import web

from .served import LoopbackServer

_ROUTE = re.compile(
    r"^/v2/(?P<name>.+?)/(?:(?P<blobs>blobs/uploads)/(?P<upload>[^/]*)|blobs/(?P<blob>[^/]+)|"
    r"manifests/(?P<manifest>[^/]+)|(?P<tags>tags/list))$")
_DEFAULT_MANIFEST_TYPE = "application/vnd.oci.image.manifest.v1+json"


def _digest(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def _error(status: int, code: str, message: str) -> web.Response:
    return web.json_response({"errors": [{"code": code, "message": message}]}, status=status)


@dataclass
class _Manifest:
    body: bytes
    media_type: str


@dataclass
class OciRegistry(LoopbackServer):
    """In-memory OCI registry on ``127.0.0.1`` (module contract)."""

    blobs: dict[str, bytes] = field(default_factory=dict)
    manifests: dict[str, dict[str, _Manifest]] = field(default_factory=dict)  # name -> digest -> manifest
    tags: dict[str, dict[str, str]] = field(default_factory=dict)  # name -> tag -> digest
    pulls: dict[str, int] = field(default_factory=dict)
    _uploads: dict[str, bytearray] = field(default_factory=dict)

    @property
    def host(self) -> str:
        return self.base_url.removeprefix("http://")

    def url(self, name: str) -> str:
        """The ``oci://`` URL of repository ``name`` (for ``flux push artifact`` and ``spec.url``)."""
        return f"oci://{self.host}/{name}"

    def app(self) -> web.Application:
        app = web.Application(client_max_size=256 << 20)
        app.router.add_route("*", "/{path:.*}", self._handle)
        return app

    def digest_of(self, name: str, tag: str) -> str | None:
        return self.tags.get(name, {}).get(tag)

    # ------------------------------------------------------------------------------------ handlers

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        path = request.path
        if path in ("/v2", "/v2/"):
            return web.json_response({}, headers={"Docker-Distribution-API-Version": "registry/2.0"})
        match = _ROUTE.match(path)
        if match is None:
            return _error(404, "NAME_UNKNOWN", f"no route for {path}")
        name = match["name"]
        if match["blobs"] is not None:
            return await self._upload(request, name, match["upload"])
        if match["blob"] is not None:
            return self._blob(request, match["blob"])
        if match["manifest"] is not None:
            return await self._manifest(request, name, match["manifest"])
        tags = sorted(self.tags.get(name, {}))
        if name not in self.tags:
            return _error(404, "NAME_UNKNOWN", f"repository {name} not known")
        return web.json_response({"name": name, "tags": tags})

    def _blob(self, request: web.Request, digest: str) -> web.StreamResponse:
        data = self.blobs.get(digest)
        if request.method not in ("GET", "HEAD"):
            return _error(405, "UNSUPPORTED", f"{request.method} on a blob")
        if data is None:
            return _error(404, "BLOB_UNKNOWN", f"blob {digest} not known")
        headers = {"Docker-Content-Digest": digest, "Content-Type": "application/octet-stream"}
        if request.method == "HEAD":
            headers["Content-Length"] = str(len(data))
            return web.Response(status=200, headers=headers)
        return web.Response(status=200, body=data, headers=headers)

    async def _upload(self, request: web.Request, name: str, upload: str) -> web.StreamResponse:
        body = await request.read()
        if request.method == "POST" and not upload:
            digest = request.query.get("digest")
            if digest:  # monolithic upload
                return self._finish(name, digest, bytearray(body))
            session = uuid.uuid4().hex
            self._uploads[session] = bytearray(body)
            return self._upload_state(name, session, status=202)
        if upload not in self._uploads:
            return _error(404, "BLOB_UPLOAD_UNKNOWN", f"upload {upload} not known")
        if request.method == "PATCH":
            self._uploads[upload] += body
            return self._upload_state(name, upload, status=202)
        if request.method == "PUT":
            data = self._uploads.pop(upload) + body
            return self._finish(name, request.query.get("digest", ""), data)
        if request.method == "GET":
            return self._upload_state(name, upload, status=204)
        if request.method == "DELETE":
            self._uploads.pop(upload, None)
            return web.Response(status=204)
        return _error(405, "UNSUPPORTED", f"{request.method} on an upload")

    def _upload_state(self, name: str, session: str, *, status: int) -> web.Response:
        size = len(self._uploads[session])
        return web.Response(status=status, headers={
            "Location": f"/v2/{name}/blobs/uploads/{session}", "Docker-Upload-UUID": session,
            "Range": f"0-{max(size - 1, 0)}", "Content-Length": "0"})

    def _finish(self, name: str, digest: str, data: bytearray) -> web.Response:
        actual = _digest(bytes(data))
        if digest != actual:
            return _error(400, "DIGEST_INVALID", f"digest {digest} does not match the content ({actual})")
        self.blobs[actual] = bytes(data)
        return web.Response(status=201, headers={"Location": f"/v2/{name}/blobs/{actual}",
                                                 "Docker-Content-Digest": actual, "Content-Length": "0"})

    async def _manifest(self, request: web.Request, name: str, reference: str) -> web.StreamResponse:
        stored = self.manifests.setdefault(name, {})
        tags = self.tags.setdefault(name, {})
        if request.method == "PUT":
            body = await request.read()
            media_type = request.headers.get("Content-Type") or json.loads(body).get(
                "mediaType", _DEFAULT_MANIFEST_TYPE)
            digest = _digest(body)
            if reference.startswith("sha256:") and reference != digest:
                return _error(400, "DIGEST_INVALID", f"manifest digest {digest} is not {reference}")
            stored[digest] = _Manifest(body=body, media_type=media_type)
            if not reference.startswith("sha256:"):
                tags[reference] = digest
            return web.Response(status=201, headers={"Location": f"/v2/{name}/manifests/{digest}",
                                                     "Docker-Content-Digest": digest, "Content-Length": "0"})
        digest = reference if reference.startswith("sha256:") else tags.get(reference, "")
        manifest = stored.get(digest)
        if request.method == "DELETE":
            if manifest is None:
                return _error(404, "MANIFEST_UNKNOWN", f"manifest {reference} not known")
            if reference in tags:
                del tags[reference]
            else:
                del stored[digest]
            return web.Response(status=202)
        if request.method not in ("GET", "HEAD"):
            return _error(405, "UNSUPPORTED", f"{request.method} on a manifest")
        if manifest is None:
            return _error(404, "MANIFEST_UNKNOWN", f"manifest {reference} not known")
        headers = {"Docker-Content-Digest": digest, "Content-Type": manifest.media_type}
        if request.method == "HEAD":
            headers["Content-Length"] = str(len(manifest.body))
            return web.Response(status=200, headers=headers)
        key = f"{name}:{reference}"
        self.pulls[key] = self.pulls.get(key, 0) + 1
        return web.Response(status=200, body=manifest.body, headers=headers)
