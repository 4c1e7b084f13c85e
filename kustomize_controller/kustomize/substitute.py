"""Post-build variable substitution (``spec.postBuild``), upstream semantics, no I/O of its own.

Contract:

- Variables: every ``substituteFrom`` reference in order — a ConfigMap's ``data`` strings or a
  Secret's decoded ``data`` — later references overriding earlier ones; then the inline
  ``substitute`` map overrides all. Newlines (``\\n``) are stripped from every value. A reference
  that is not found is skipped when ``optional``; any other lookup failure is an error
  ``substitute from '<Kind>/<name>' error: <cause>``.
- Variables are loaded lazily, once per build, at the first object that is not opted out, and a
  loading error is attributed to that object — as upstream, which loads them per object.
- An object labelled or annotated ``kustomize.toolkit.fluxcd.io/substitute: disabled`` (exact
  lowercase value) is left alone.
- Substitution runs over the object's YAML text — the builder's own serialisation, so quoting
  chosen in the source survives (``"${PORT}"`` stays a string) — only when at least one variable
  is defined or the strategy is ``Always``. Variable names must match
  ``^[_[:alpha:]][_[:alpha:][:digit:]]*$`` (ASCII).
- Strict mode (feature gate ``StrictPostBuildSubstitutions``, default on) fails on an unset
  variable without a default-providing operator; lenient mode expands it to "".
- Errors are :class:`SubstitutionError` worded like upstream:
  ``post build failed for '<Kind.version.group>/<name>': envsubst error: variable substitution failed: ...``.

Lookups go through the :class:`VarSource` protocol so the module stays pure; :class:`KubeVarSource`
adapts any client with an async ``get(api_version, kind, name, namespace)``.
"""

from __future__ import annotations

import base64
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import yaml

from kustomize_controller.kustomize import envsubst
from kustomize_controller.kustomize.errors import EnvsubstError, SubstitutionError

SUBSTITUTE_KEY = "kustomize.toolkit.fluxcd.io/substitute"
DISABLED = "disabled"
VAR_NAME_PATTERN = "^[_[:alpha:]][_[:alpha:][:digit:]]*$"
_VAR_NAME_RE = re.compile(r"[_A-Za-z][_A-Za-z0-9]*")
STRATEGY_ALWAYS = "Always"
STRATEGY_WITH_VARIABLES = "WithVariables"


@dataclass(frozen=True, slots=True)
class SubstituteReference:
    kind: str
    name: str
    optional: bool = False


@dataclass(frozen=True, slots=True)
class PostBuild:
    """The parts of ``spec.postBuild`` substitution needs (JSON names in :meth:`from_spec`)."""

    substitute: Mapping[str, str] | None = None
    substitute_from: Sequence[SubstituteReference] = ()
    substitute_strategy: str = STRATEGY_WITH_VARIABLES

    @classmethod
    def from_spec(cls, post_build: Mapping[str, Any] | None) -> PostBuild | None:
        if post_build is None:
            return None
        subst = post_build.get("substitute")
        refs = [
            SubstituteReference(
                kind=str(r.get("kind", "")), name=str(r.get("name", "")), optional=bool(r.get("optional"))
            )
            for r in post_build.get("substituteFrom") or []
        ]
        return cls(
            substitute=None if subst is None else {str(k): str(v) for k, v in subst.items()},
            substitute_from=tuple(refs),
            substitute_strategy=str(post_build.get("substituteStrategy") or STRATEGY_WITH_VARIABLES),
        )


class VarSource(Protocol):
    """Reads the variables of one ConfigMap/Secret in the Kustomization's namespace.

    Returns the (decoded) data map, or ``None`` when the object does not exist. Any other
    failure is raised and reported with the reference.
    """

    async def __call__(self, kind: str, name: str) -> Mapping[str, str] | None: ...


class ObjectGetter(Protocol):
    async def get(
        self, api_version: str, kind: str, name: str, namespace: str | None = None
    ) -> dict[str, Any]: ...


@dataclass(slots=True)
class KubeVarSource:
    """A :class:`VarSource` over a Kubernetes client; 404 (``status == 404``) means not found."""

    client: ObjectGetter
    namespace: str

    async def __call__(self, kind: str, name: str) -> Mapping[str, str] | None:
        try:
            obj = await self.client.get("v1", kind, name, self.namespace)
        except Exception as err:
            if getattr(err, "status", None) == 404:
                return None
            raise
        data = obj.get("data") or {}
        if kind == "Secret":
            return {k: base64.b64decode(v).decode("utf-8", errors="replace") for k, v in data.items()}
        return {k: str(v) for k, v in data.items()}


def gvk_string(obj: Mapping[str, Any]) -> str:
    """kyaml's ``resid.Gvk.String()``: ``Kind.version.group``, ``[noKind]``/``[noVer]``/``[noGrp]`` for blanks."""
    api_version = str(obj.get("apiVersion") or "")
    group, sep, version = api_version.partition("/")
    if not sep:
        group, version = "", api_version
    kind = str(obj.get("kind") or "")
    return ".".join((kind or "[noKind]", version or "[noVer]", group or "[noGrp]"))


def object_label(obj: Mapping[str, Any]) -> str:
    name = (obj.get("metadata") or {}).get("name", "")
    return f"{gvk_string(obj)}/{name}"


def is_substitution_disabled(obj: Mapping[str, Any]) -> bool:
    meta = obj.get("metadata")
    maps = [meta.get(key) for key in ("labels", "annotations")] if isinstance(meta, Mapping) else []
    return any(isinstance(m, Mapping) and m.get(SUBSTITUTE_KEY) == DISABLED for m in maps)


async def load_variables(post_build: PostBuild, source: VarSource | None) -> dict[str, str]:
    """Merge substituteFrom (skipped when ``source`` is None) and the inline map, in order."""
    variables: dict[str, str] = {}
    if source is not None:
        for ref in post_build.substitute_from:
            try:
                data = await source(ref.kind, ref.name)
            except Exception as err:
                raise SubstitutionError(f"substitute from '{ref.kind}/{ref.name}' error: {err}") from err
            if data is None:
                if ref.optional:
                    continue
                raise SubstitutionError(
                    f"substitute from '{ref.kind}/{ref.name}' error: "
                    f"{ref.kind.lower()}s \"{ref.name}\" not found"
                )
            for k, v in data.items():
                variables[k] = v.replace("\n", "")
    for k, v in (post_build.substitute or {}).items():
        variables[k] = v.replace("\n", "")
    return variables


def substitute_text(text: str, variables: Mapping[str, str], *, strict: bool) -> str:
    """Validate the names and expand; errors worded as upstream's ``varSubstitution``."""
    for name in variables:
        if not _VAR_NAME_RE.fullmatch(name):
            raise EnvsubstError(f"'{name}' var name is invalid, must match '{VAR_NAME_PATTERN}'")
    try:
        return envsubst.expand(text, envsubst.mapping_lookup(dict(variables), strict=strict))
    except EnvsubstError as err:
        raise EnvsubstError(f"variable substitution failed: {err}") from err


def _load_document(text: str) -> dict[str, Any]:
    try:
        obj = yaml.load(text, Loader=yaml.CSafeLoader)
    except yaml.YAMLError as err:
        raise EnvsubstError(f"YAMLToJSON: {err}") from err
    if not isinstance(obj, dict):
        raise EnvsubstError("YAMLToJSON: the substituted document is not an object")
    return obj


@dataclass
class Substituter:
    """Applies one Kustomization's postBuild to the objects of one build.

    ``apply(text, obj)`` returns the new ``(text, obj)`` or ``None`` when nothing changed.
    """

    post_build: PostBuild
    source: VarSource | None
    strict: bool = True
    _variables: dict[str, str] | None = field(default=None, init=False)

    def preload(self, variables: Mapping[str, str]) -> None:
        """Use ``variables`` (what :func:`load_variables` returned) instead of loading them again."""
        self._variables = dict(variables)

    async def apply(self, text: str, obj: Mapping[str, Any]) -> tuple[str, dict[str, Any]] | None:
        if is_substitution_disabled(obj):
            return None
        try:
            if self._variables is None:
                self._variables = await load_variables(self.post_build, self.source)
            variables = self._variables
            if not variables and self.post_build.substitute_strategy != STRATEGY_ALWAYS:
                return None
            try:
                out = substitute_text(text, variables, strict=self.strict)
            except EnvsubstError as err:
                raise SubstitutionError(f"envsubst error: {err}") from err
            if out == text:
                return None
            try:
                new_obj = _load_document(out)
            except EnvsubstError as err:
                raise SubstitutionError(f"envsubst error: {err}") from err
        except SubstitutionError as err:
            raise SubstitutionError(f"post build failed for '{object_label(obj)}': {err}") from err
        return out, new_obj
