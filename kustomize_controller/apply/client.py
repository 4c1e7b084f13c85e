"""What the apply engine needs from a Kubernetes client (a Protocol, so tests can use fakes).

``kube.client.KubeClient`` satisfies it (checked by mypy in ``tests/unit/apply/test_client_protocol.py``).
Errors are the ``kube.errors`` tree; a kind the server does not serve raises
``kube.discovery.NoKindMatchError`` (the real client refreshes its REST mapper on a miss, which is what
makes a CRD applied in the definitions stage usable by a later stage).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal, Protocol

PatchType = Literal["merge", "json", "strategic", "apply"]


class ReadClient(Protocol):
    async def get(self, api_version: str, kind: str, name: str, namespace: str | None = None) -> dict[str, Any]: ...

    async def list(
        self,
        api_version: str,
        kind: str,
        namespace: str | None = None,
        *,
        label_selector: str | None = None,
        field_selector: str | None = None,
        metadata_only: bool = False,
    ) -> list[dict[str, Any]]: ...


class ApplyClient(ReadClient, Protocol):
    async def apply(
        self,
        obj: Mapping[str, Any],
        *,
        field_manager: str,
        force: bool = True,
        dry_run: bool = False,
        subresource: str | None = None,
    ) -> dict[str, Any]: ...

    async def patch(
        self,
        api_version: str,
        kind: str,
        name: str,
        namespace: str | None,
        body: Any,
        *,
        patch_type: PatchType,
        field_manager: str | None = None,
        force: bool | None = None,
        dry_run: bool = False,
        subresource: str | None = None,
    ) -> dict[str, Any]: ...

    async def delete(
        self,
        api_version: str,
        kind: str,
        name: str,
        namespace: str | None = None,
        *,
        propagation_policy: str | None = None,
        dry_run: bool = False,
    ) -> dict[str, Any] | None: ...
