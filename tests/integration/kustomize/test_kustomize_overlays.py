"""Spec overlays, generation and post-build substitution through the real builder."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from kustomize_controller.kustomize.errors import GenerateError, KustomizeBuildError
from kustomize_controller.kustomize.pipeline import BuildOptions, BuildPipeline

from .conftest import DATA, Open, Variant

pytestmark = pytest.mark.builder

BASE_OVERLAY = DATA / "differential" / "01-base-overlay"
COMPONENTS = DATA / "differential" / "02-components"


async def build(variant: Variant, source: Path, spec: dict[str, Any], **kw: Any) -> list[dict[str, Any]]:
    options = BuildOptions.from_spec(spec, **kw)
    async with variant.checkout(source, path=options.path) as checkout:
        result = await variant.pipeline.build(checkout, options)
    return result.objects


def by_kind(objects: list[dict[str, Any]], kind: str) -> dict[str, Any]:
    return next(o for o in objects if o["kind"] == kind)


async def test_target_namespace_prefix_suffix_images(variant: Variant) -> None:
    objects = await build(
        variant,
        BASE_OVERLAY,
        {
            "path": "./overlays/prod",
            "targetNamespace": "apps",
            "namePrefix": "flux-",
            "nameSuffix": "-x",
            "images": [{"name": "nginx", "newName": "ghcr.io/nginx", "newTag": "1.27"}],
        },
    )
    deploy = by_kind(objects, "Deployment")
    assert deploy["metadata"]["name"] == "flux-web-x"  # spec prefix replaces the overlay's
    assert {o["metadata"]["namespace"] for o in objects} == {"apps"}
    assert deploy["spec"]["template"]["spec"]["containers"][0]["image"] == "ghcr.io/nginx:1.27"
    assert deploy["spec"]["replicas"] == 3


async def test_patches_with_targets_and_components(variant: Variant, tmp_path: Path) -> None:
    objects = await build(
        variant,
        COMPONENTS,
        {
            "path": "base",
            "components": ["../components/monitoring", "../components/absent"],
            "ignoreMissingComponents": True,
            "patches": [
                {
                    "patch": "- op: add\n  path: /metadata/labels\n  value: {patched: 'yes'}\n",
                    "target": {"kind": "Service", "name": "web"},
                },
                {"patch": "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\nspec:\n  replicas: 9\n"},
            ],
        },
    )
    assert by_kind(objects, "Service")["metadata"]["labels"] == {"patched": "yes"}
    assert by_kind(objects, "Deployment")["spec"]["replicas"] == 9
    assert by_kind(objects, "ServiceMonitor")["metadata"]["name"] == "web"
    with pytest.raises(KustomizeBuildError):
        await build(variant, COMPONENTS, {"path": "base", "components": ["../components/absent"]})
    with pytest.raises(GenerateError, match="must be local and relative"):
        await build(variant, COMPONENTS, {"path": "base", "components": ["https://example.com/c"]})


async def test_generated_kustomization_for_plain_yaml(variant: Variant, tmp_path: Path) -> None:
    src = tmp_path / "src"
    (src / "deploy" / "nested").mkdir(parents=True)
    (src / "deploy" / "a.yaml").write_text("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n")
    (src / "deploy" / "nested" / "b.yml").write_text("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: b\n")
    (src / "deploy" / "README.md").write_text("# not yaml")
    objects = await build(variant, src, {"path": "deploy", "targetNamespace": "t"})
    assert [(o["metadata"]["name"], o["metadata"]["namespace"]) for o in objects] == [("a", "t"), ("b", "t")]
    (src / "empty").mkdir()
    assert await build(variant, src, {"path": "empty"}) == []


async def test_origin_annotations_when_no_resources(variant: Variant, tmp_path: Path) -> None:
    src = tmp_path / "src"
    src.mkdir()
    (src / "kustomization.yaml").write_text("configMapGenerator:\n- name: g\n  literals: [a=b]\n")
    [obj] = await build(variant, src, {})
    assert "config.kubernetes.io/origin" in obj["metadata"]["annotations"]


async def test_post_build_substitution_end_to_end(variant: Variant, tmp_path: Path) -> None:
    src = tmp_path / "src"
    src.mkdir()
    (src / "cm.yaml").write_text(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: app-${ENV}\n  labels:\n    env: ${ENV:=dev}\n"
        "data:\n  replicas: \"${REPLICAS}\"\n  escaped: $${NOT_A_VAR}\n  upper: ${ENV^^}\n"
        "---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: untouched\n"
        "  annotations:\n    kustomize.toolkit.fluxcd.io/substitute: disabled\ndata:\n  v: ${ENV}\n"
    )
    spec = {"postBuild": {"substitute": {"ENV": "prod", "REPLICAS": "3"}}}
    objects = await build(variant, src, spec)
    cm = objects[0]
    assert cm["metadata"] == {"name": "app-prod", "labels": {"env": "prod"}}
    assert cm["data"] == {"replicas": 3, "escaped": "${NOT_A_VAR}", "upper": "PROD"}
    assert objects[1]["data"] == {"v": "${ENV}"}


class MapSource:
    def __init__(self, objects: dict[tuple[str, str], dict[str, str]]) -> None:
        self.objects = objects

    async def __call__(self, kind: str, name: str) -> dict[str, str] | None:
        return self.objects.get((kind, name))


async def test_substitute_from_order_optional_and_inline_override(pipeline: BuildPipeline, open_source: Open,
                                                                 tmp_path: Path) -> None:
    src = tmp_path / "src"
    src.mkdir()
    (src / "cm.yaml").write_text(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: vars\ndata:\n"
        "  a: ${A}\n  b: ${B}\n  c: ${C}\n  d: '${D:=fallback}'\n"
    )
    spec = {
        "postBuild": {
            "substitute": {"C": "inline"},
            "substituteFrom": [
                {"kind": "ConfigMap", "name": "first"},
                {"kind": "Secret", "name": "second"},
                {"kind": "ConfigMap", "name": "absent", "optional": True},
            ],
        }
    }
    source = MapSource(
        {("ConfigMap", "first"): {"A": "one", "B": "one", "C": "one"}, ("Secret", "second"): {"B": "two\n"}}
    )
    options = BuildOptions.from_spec(spec)
    async with open_source(src, path="") as checkout:
        result = await pipeline.build(checkout, options, var_source=source)
    assert result.objects[0]["data"] == {"a": "one", "b": "two", "c": "inline", "d": "fallback"}
