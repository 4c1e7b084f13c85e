"""The waits between stages (``manager.py``'s contract): health, then discovery.

``_wait_stage`` polls the objects of the definitions or classes stage until Current
(``wait_interval`` / ``wait_timeout``; ``<Kind/ns/name> status: ...`` on timeout, as an
``ApplyStepError`` carrying the change set so far). ``_wait_served`` then waits until discovery maps
every served version of the CRDs the stage created or changed: any answer but "no such kind" to a GET
of a probe name means the kind is mapped; after ``wait_timeout`` the next stage reports what is missing.
"""

from __future__ import annotations

from collections.abc import Sequence

from kustomize_controller.apply.changeset import Action, ChangeSet
from kustomize_controller.apply.errors import ApplyStepError, HealthCheckError
from kustomize_controller.apply.health import HealthTarget, StatusPoller, wait_for_set
from kustomize_controller.apply.objects import Object, ObjRef
from kustomize_controller.apply.options import ApplyOptions
from kustomize_controller.apply.plan import Engine
from kustomize_controller.apply.staging import is_crd
from kustomize_controller.kube.discovery import NoKindMatchError
from kustomize_controller.kube.errors import KubeError


class Waiting(Engine):
    """The stage waits (module contract)."""

    async def _wait_served(self, objects: Sequence[Object], stage_cs: ChangeSet, options: ApplyOptions) -> None:
        """Until discovery resolves the kinds of the CRDs this stage created or changed (module contract)."""
        touched = {e.ref for e in stage_cs if e.action in (Action.CREATED, Action.CONFIGURED)}
        kinds = [k for o in objects if is_crd(o) and ObjRef.from_object(o) in touched for k in _served_kinds(o)]
        deadline = self.clock.monotonic() + options.wait_timeout
        for api_version, kind, namespaced in kinds:
            while True:
                try:
                    # any answer but "no such kind" (NotFound, Forbidden...) means the kind is mapped
                    await self.client.get(api_version, kind, "kustomize-controller-probe",
                                          "default" if namespaced else None)
                except NoKindMatchError:
                    if self.clock.monotonic() >= deadline:
                        return
                    await self.clock.sleep(min(options.wait_interval, 0.5))
                    continue
                except (KubeError, ValueError):
                    pass
                break

    async def _wait_stage(self, stage_cs: ChangeSet, options: ApplyOptions, so_far: ChangeSet) -> None:
        targets = [HealthTarget.of(e.ref, e.version) for e in stage_cs]
        poller = StatusPoller(client=self.client, clock=self.clock)
        try:
            await wait_for_set(
                targets,
                poller=poller,
                clock=self.clock,
                timeout_seconds=options.wait_timeout,
                interval=options.wait_interval,
            )
        except HealthCheckError as exc:
            raise ApplyStepError(exc.message, change_set=ChangeSet(list(so_far.entries))) from exc


def _served_kinds(crd: Object) -> list[tuple[str, str, bool]]:
    """(apiVersion, kind, namespaced) of every served version of a CRD manifest."""
    spec = crd.get("spec") or {}
    group, kind = str(spec.get("group") or ""), str((spec.get("names") or {}).get("kind") or "")
    if not group or not kind:
        return []
    namespaced = spec.get("scope", "Namespaced") == "Namespaced"
    return [(f"{group}/{v['name']}", kind, namespaced) for v in spec.get("versions") or []
            if isinstance(v, dict) and v.get("name") and v.get("served", True)]
