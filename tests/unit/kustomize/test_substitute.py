"""Post-build substitution: variable sources, precedence, opt-out, strategy and error wording."""

from __future__ import annotations

import base64
from collections.abc import Mapping
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kustomize_controller.kustomize.errors import EnvsubstError, SubstitutionError
from kustomize_controller.kustomize.substitute import (
    KubeVarSource,
    PostBuild,
    Substituter,
    SubstituteReference,
    gvk_string,
    load_variables,
    substitute_text,
)

CM_TEXT = """apiVersion: v1
kind: ConfigMap
metadata:
  name: app
data:
  a: ${A}
  b: ${B:=dflt}
"""


def cm_obj(**meta: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "app", **meta}, "data": {}}


class FakeSource:
    def __init__(self, objects: Mapping[tuple[str, str], Mapping[str, str] | Exception]) -> None:
        self.objects = objects
        self.calls: list[tuple[str, str]] = []

    async def __call__(self, kind: str, name: str) -> Mapping[str, str] | None:
        self.calls.append((kind, name))
        value = self.objects.get((kind, name))
        if isinstance(value, Exception):
            raise value
        return value


async def test_substitute_from_in_order_then_inline_overrides_and_newlines_stripped() -> None:
    source = FakeSource(
        {
            ("ConfigMap", "one"): {"A": "from-one", "B": "b1\n"},
            ("Secret", "two"): {"A": "from-two\nx"},
        }
    )
    pb = PostBuild(
        substitute={"C": "inline\n"},
        substitute_from=(SubstituteReference("ConfigMap", "one"), SubstituteReference("Secret", "two")),
    )
    assert await load_variables(pb, source) == {"A": "from-twox", "B": "b1", "C": "inline"}
    pb2 = PostBuild(substitute={"A": "inline"}, substitute_from=pb.substitute_from)
    assert (await load_variables(pb2, source))["A"] == "inline"


async def test_optional_reference_tolerates_not_found_only() -> None:
    source = FakeSource({("ConfigMap", "broken"): RuntimeError("connection refused")})
    pb = PostBuild(substitute_from=(SubstituteReference("ConfigMap", "missing", optional=True),))
    assert await load_variables(pb, source) == {}
    with pytest.raises(SubstitutionError) as err:
        await load_variables(PostBuild(substitute_from=(SubstituteReference("Secret", "missing"),)), source)
    assert str(err.value) == "substitute from 'Secret/missing' error: secrets \"missing\" not found"
    broken = PostBuild(substitute_from=(SubstituteReference("ConfigMap", "broken", optional=True),))
    with pytest.raises(SubstitutionError, match="substitute from 'ConfigMap/broken' error: connection refused"):
        await load_variables(broken, source)


async def test_without_source_substitute_from_is_skipped() -> None:
    pb = PostBuild(substitute={"A": "x"}, substitute_from=(SubstituteReference("ConfigMap", "vars"),))
    assert await load_variables(pb, None) == {"A": "x"}


async def test_apply_substitutes_text_and_reparses() -> None:
    sub = Substituter(PostBuild(substitute={"A": "8080"}), None)
    result = await sub.apply(CM_TEXT, cm_obj())
    assert result is not None
    text, obj = result
    assert "a: 8080" in text
    assert obj["data"] == {"a": 8080, "b": "dflt"}  # types follow YAML, as upstream


async def test_quoted_values_stay_strings() -> None:
    text = 'apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: app\ndata:\n  a: "${A}"\n'
    result = await Substituter(PostBuild(substitute={"A": "8080"}), None).apply(text, cm_obj())
    assert result is not None and result[1]["data"] == {"a": "8080"}


@pytest.mark.parametrize("where", ["labels", "annotations"])
async def test_disabled_label_or_annotation_skips(where: str) -> None:
    obj = cm_obj(**{where: {"kustomize.toolkit.fluxcd.io/substitute": "disabled"}})
    assert await Substituter(PostBuild(substitute={"A": "x"}), None).apply(CM_TEXT, obj) is None


@pytest.mark.parametrize("where", ["labels", "annotations"])
async def test_labels_or_annotations_that_are_not_maps_do_not_disable(where: str) -> None:
    # found by fuzzing: a string there raised AttributeError out of is_substitution_disabled
    obj = cm_obj()
    obj["metadata"][where] = "kustomize.toolkit.fluxcd.io/substitute: disabled"
    assert await Substituter(PostBuild(substitute={"A": "x"}), None).apply(CM_TEXT, obj) is not None


async def test_disable_value_is_exact_lowercase() -> None:
    obj = cm_obj(annotations={"kustomize.toolkit.fluxcd.io/substitute": "Disabled"})
    assert await Substituter(PostBuild(substitute={"A": "x"}), None).apply(CM_TEXT, obj) is not None


async def test_no_variables_means_no_substitution_unless_always() -> None:
    assert await Substituter(PostBuild(substitute={}), None).apply(CM_TEXT, cm_obj()) is None
    always = Substituter(PostBuild(substitute_strategy="Always"), None, strict=False)
    result = await always.apply(CM_TEXT, cm_obj())
    assert result is not None and result[1]["data"] == {"a": None, "b": "dflt"}


async def test_strict_mode_error_wording() -> None:
    sub = Substituter(PostBuild(substitute={"OTHER": "x"}), None, strict=True)
    with pytest.raises(SubstitutionError) as err:
        await sub.apply(CM_TEXT, cm_obj())
    assert str(err.value) == (
        "post build failed for 'ConfigMap.v1.[noGrp]/app': envsubst error: variable substitution failed: "
        'variable not set (strict mode): "A"'
    )


async def test_invalid_var_name_wording() -> None:
    sub = Substituter(PostBuild(substitute={"bad-name": "x"}), None)
    with pytest.raises(SubstitutionError) as err:
        await sub.apply("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: app\n", cm_obj())
    assert str(err.value) == (
        "post build failed for 'ConfigMap.v1.[noGrp]/app': envsubst error: "
        "'bad-name' var name is invalid, must match '^[_[:alpha:]][_[:alpha:][:digit:]]*$'"
    )


async def test_substitution_producing_invalid_yaml_is_an_error() -> None:
    sub = Substituter(PostBuild(substitute={"A": "x: [unclosed"}), None)
    with pytest.raises(SubstitutionError, match="envsubst error: YAMLToJSON"):
        await sub.apply(CM_TEXT, cm_obj())


async def test_variables_loaded_once_and_error_attributed_to_first_object() -> None:
    source = FakeSource({("ConfigMap", "vars"): {"A": "1"}})
    sub = Substituter(PostBuild(substitute_from=(SubstituteReference("ConfigMap", "vars"),)), source)
    await sub.apply(CM_TEXT, cm_obj())
    await sub.apply(CM_TEXT, cm_obj())
    assert source.calls == [("ConfigMap", "vars")]
    failing = Substituter(PostBuild(substitute_from=(SubstituteReference("ConfigMap", "nope"),)), FakeSource({}))
    with pytest.raises(SubstitutionError) as err:
        await failing.apply(CM_TEXT, cm_obj())
    assert str(err.value).startswith("post build failed for 'ConfigMap.v1.[noGrp]/app': substitute from")


def test_gvk_string() -> None:
    assert gvk_string({"apiVersion": "apps/v1", "kind": "Deployment"}) == "Deployment.v1.apps"
    assert gvk_string({"apiVersion": "networking.k8s.io/v1", "kind": "Ingress"}) == "Ingress.v1.networking.k8s.io"
    assert gvk_string({"apiVersion": "v1", "kind": "Secret"}) == "Secret.v1.[noGrp]"
    assert gvk_string({}) == "[noKind].[noVer].[noGrp]"


def test_post_build_from_spec() -> None:
    pb = PostBuild.from_spec(
        {
            "substitute": {"a": "1"},
            "substituteFrom": [{"kind": "Secret", "name": "s", "optional": True}],
            "substituteStrategy": "Always",
        }
    )
    assert pb == PostBuild({"a": "1"}, (SubstituteReference("Secret", "s", True),), "Always")
    assert PostBuild.from_spec(None) is None


class FakeClient:
    def __init__(self, objects: dict[tuple[str, str], dict[str, Any]]) -> None:
        self.objects = objects

    async def get(self, api_version: str, kind: str, name: str, namespace: str | None = None) -> dict[str, Any]:
        try:
            return self.objects[(kind, name)]
        except KeyError:
            err = Exception(f'{kind.lower()}s "{name}" not found')
            err.status = 404  # type: ignore[attr-defined]
            raise err from None


async def test_kube_var_source_decodes_secrets_and_maps_404() -> None:
    client = FakeClient(
        {
            ("ConfigMap", "c"): {"data": {"A": "1"}},
            ("Secret", "s"): {"data": {"B": base64.b64encode(b"two").decode()}},
        }
    )
    source = KubeVarSource(client, "ns")
    assert await source("ConfigMap", "c") == {"A": "1"}
    assert await source("Secret", "s") == {"B": "two"}
    assert await source("Secret", "missing") is None


@settings(max_examples=300)
@given(
    st.text(max_size=80),
    st.dictionaries(st.text(min_size=1, max_size=6), st.text(max_size=6), max_size=3),
    st.booleans(),
)
def test_substitute_text_raises_only_envsubst_errors(text: str, variables: dict[str, str], strict: bool) -> None:
    try:
        out = substitute_text(text, variables, strict=strict)
    except EnvsubstError:
        return
    assert isinstance(out, str)
    if "$" not in text:
        assert out == text
