"""Minimal CustomResourceDefinitions for the Flux source kinds, for demos on an empty API server.

Tests install the full upstream source CRDs; ``make run`` only needs the API server to serve the four
kinds (``source.toolkit.fluxcd.io/v1``, namespaced, with a status subresource) so that the controller
can read ``status.artifact``. The schemas preserve unknown fields instead of validating them.
"""

from __future__ import annotations

from typing import Any

KINDS = {
    "GitRepository": ("gitrepositories", ["gitrepo"]),
    "OCIRepository": ("ocirepositories", ["ocirepo"]),
    "Bucket": ("buckets", []),
    "ExternalArtifact": ("externalartifacts", []),
}


def source_crds() -> list[dict[str, Any]]:
    crds = []
    for kind, (plural, short_names) in KINDS.items():
        crds.append({
            "apiVersion": "apiextensions.k8s.io/v1",
            "kind": "CustomResourceDefinition",
            "metadata": {"name": f"{plural}.source.toolkit.fluxcd.io"},
            "spec": {
                "group": "source.toolkit.fluxcd.io",
                "names": {"kind": kind, "listKind": f"{kind}List", "plural": plural,
                          "singular": kind.lower(), "shortNames": short_names},
                "scope": "Namespaced",
                "versions": [{
                    "name": "v1", "served": True, "storage": True,
                    "subresources": {"status": {}},
                    "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}},
                }],
            },
        })
    return crds
