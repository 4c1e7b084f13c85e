#!/usr/bin/env python3
"""Write ``kustomize_controller/apply/typedschema.json`` from a kube-apiserver's OpenAPI v3 documents.

Upstream's controller normalises every object of a built-in kind by a round trip through client-go's
typed structs (fluxcd/pkg ``ssa/normalize``); ``apply/typed.py`` does the same from a table of those
structs, which this script makes: the OpenAPI documents describe exactly those Go structs (see
``typed.table_from_openapi``).

The table must describe the k8s.io/api version upstream links (kustomize-controller v1.9.x: v0.36): make it
from kube-apiserver v1.36 with every API version served (``--runtime-config=api/all=true``):

    python scripts/gen_typedschema.py                 # starts a control plane from $KUBE_ASSETS
    python scripts/gen_typedschema.py --kubeconfig F  # or reads an API server that serves all versions
    python scripts/gen_typedschema.py --check         # exit 1 when the checked-in table differs

``make test-real`` checks the table against the versions the real control plane serves
(``tests/integration/apply/test_typedschema.py``).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
TABLE = REPO / "kustomize_controller" / "apply" / "typedschema.json"
sys.path.insert(0, str(REPO))

from kustomize_controller.apply.typed import builtin_group_version, table_from_openapi  # noqa: E402


def _raw(kubeconfig: str, path: str) -> Any:
    kubectl = str(REPO / ".venv" / "bin" / "kubectl")
    done = subprocess.run([kubectl, "--kubeconfig", kubeconfig, "get", "--raw", path], capture_output=True,
                          text=True, check=True, timeout=120)
    return json.loads(done.stdout)


def build(kubeconfig: str) -> dict[str, Any]:
    paths = sorted(p for p in _raw(kubeconfig, "/openapi/v3")["paths"] if builtin_group_version(p))
    return table_from_openapi((p, _raw(kubeconfig, f"/openapi/v3/{p}")) for p in paths)


def render(table: dict[str, Any]) -> str:
    """One root and one type per line: a regenerated table diffs by the types that changed."""
    roots = list(table["roots"].items())
    types = list(table["types"].items())
    lines = ["{", '"roots": {']
    lines += [f"  {json.dumps(k)}: {json.dumps(v)}{',' if i < len(roots) - 1 else ''}"
              for i, (k, v) in enumerate(roots)]
    lines += ["},", '"types": {']
    lines += [f"  {json.dumps(k)}: {json.dumps(v, separators=(',', ':'), sort_keys=True)}"
              f"{',' if i < len(types) - 1 else ''}" for i, (k, v) in enumerate(types)]
    lines += ["}", "}"]
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--kubeconfig", default=None)
    parser.add_argument("--check", action="store_true")
    args = parser.parse_args()
    if args.kubeconfig:
        text = render(build(args.kubeconfig))
    else:
        from tests.controlplane import ControlPlane, missing_assets

        why = missing_assets(os.environ.get("KUBE_ASSETS"))
        if why:
            print(f"no API server: {why}", file=sys.stderr)
            return 2
        with ControlPlane(assets=Path(os.environ["KUBE_ASSETS"]), controller_manager=False, audit=False,
                          apiserver_args=("--runtime-config=api/all=true",)) as plane:
            text = render(build(str(plane.admin_kubeconfig)))
    if args.check:
        if TABLE.read_text() != text:
            print(f"{TABLE.relative_to(REPO)} is not what the API server describes: run {sys.argv[0]}",
                  file=sys.stderr)
            return 1
        return 0
    TABLE.write_text(text)
    print(f"wrote {TABLE.relative_to(REPO)} ({len(text)} bytes)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
