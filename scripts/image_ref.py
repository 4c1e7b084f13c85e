#!/usr/bin/env python3
"""Print the controller image's reference (``name:tag``) as the manifests deploy it.

The one place that names the image and its version is the ``images:`` entry of
``manifests/deployment/kustomization.yaml`` (kustomize rewrites the Deployment's ``image`` from it);
``make image`` tags the image it builds with what this prints. Standard library only.
Usage: image_ref.py [KUSTOMIZATION_FILE]
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

DEFAULT = Path(__file__).resolve().parent.parent / "manifests" / "deployment" / "kustomization.yaml"
IMAGE_NAME = "kustomize-controller-python"  # the Deployment's image, which the entry rewrites


def image_ref(text: str) -> str:
    """``newName`` (or ``name``) and ``newTag`` of the ``images:`` entry for ``IMAGE_NAME``."""
    entries = re.split(r"^\s*-\s+(?=name:)", text.split("images:", 1)[-1], flags=re.MULTILINE)[1:]
    for entry in entries:
        fields = dict(re.findall(r"^\s*(name|newName|newTag):\s*['\"]?([^'\"\s#]+)", entry, flags=re.MULTILINE))
        if fields.get("name") == IMAGE_NAME:
            if "newTag" not in fields:
                raise SystemExit(f"image_ref: the images entry for {IMAGE_NAME} has no newTag")
            return f"{fields.get('newName', IMAGE_NAME)}:{fields['newTag']}"
    raise SystemExit(f"image_ref: no images entry for {IMAGE_NAME}")


def main(argv: list[str]) -> int:
    path = Path(argv[0]) if argv else DEFAULT
    print(image_ref(path.read_text()))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
