"""The source watch (upstream's revision-change predicate and index): a new artifact revision triggers
exactly one reconcile of each Kustomization using the source; source updates that keep the revision
trigger none.

What else may reconcile a Kustomization is kept out of the count: its interval (10 minutes) and the
``--requeue-dependency`` poll of a dependent. A dependent whose first attempt at a revision finds its
dependency behind is woken when the dependency becomes ready (``EnableDependencyQueueing``) and reconciles
the revision then; the poll it scheduled still fires later (the workqueue's delayed entry is not
superseded by the wake, as in client-go) and reconciles the same revision again. With the suite's 1 s poll
that second run landed inside the test whenever the machine was slow, so the poll is set beyond the test's
life here: the count is then what the events cause, whatever the timing.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from kustomize_controller.testing.artifacts import set_source_not_ready
from tests.integration.controller.conftest import ControllerEnv
from tests.integration.controller.manifests import configmap

pytestmark = pytest.mark.integration


def entry(obj: dict[str, Any], revision: str) -> dict[str, Any]:
    (found,) = [h for h in obj["status"]["history"] if h["metadata"]["revision"] == revision]
    return found


async def test_one_reconcile_per_revision(env: ControllerEnv) -> None:
    ns = env.namespace
    first = await env.publish({"cm.yaml": configmap("a", {"v": "1"})})
    await env.start(requeue_dependency=timedelta(minutes=10),  # module docstring
                    feature_gates=env.gates(EnableDependencyQueueing=True))
    await env.create(env.kustomization(targetNamespace=ns))
    await env.create(env.kustomization("other", targetNamespace=ns, dependsOn=[{"name": "app"}]))
    await env.wait_ready(revision=first["revision"])
    await env.wait_ready("other", revision=first["revision"])

    second = await env.publish({"cm.yaml": configmap("a", {"v": "2"})})
    obj = await env.wait_ready(revision=second["revision"])
    other = await env.wait_ready("other", revision=second["revision"])
    assert (await env.get("v1", "ConfigMap", "a"))["data"] == {"v": "2"}

    # a status change of the source without a new revision is not a reason to reconcile
    await set_source_not_ready(env.client, namespace=ns, name="repo", message="fetch failed")
    # barrier: a requested reconcile is queued behind anything the events above caused
    token = await env.request_reconcile()
    obj = await env.wait_handled(token)
    assert entry(obj, second["revision"])["totalReconciliations"] == 2  # the revision event + the request
    other = await env.get_ks("other")
    assert entry(other, second["revision"])["totalReconciliations"] == 1
    assert entry(obj, first["revision"])["totalReconciliations"] == 1
