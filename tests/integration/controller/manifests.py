"""Small manifests shared by the behaviour tests."""

from __future__ import annotations


def configmap(name: str, data: dict[str, str] | None = None, *, annotations: dict[str, str] | None = None) -> str:
    lines = ["apiVersion: v1", "kind: ConfigMap", "metadata:", f"  name: {name}"]
    if annotations:
        lines.append("  annotations:")
        lines += [f"    {k}: {v!r}".replace("'", '"') for k, v in annotations.items()]
    lines.append("data:")
    for key, value in (data or {"key": "value"}).items():
        lines.append(f"  {key}: {value!r}".replace("'", '"'))
    return "\n".join(lines) + "\n"


def deployment(name: str, *, app: str | None = None, image: str = "nginx:1.27") -> str:
    app = app or name
    return f"""apiVersion: apps/v1
kind: Deployment
metadata:
  name: {name}
spec:
  replicas: 1
  selector:
    matchLabels:
      app: {app}
  template:
    metadata:
      labels:
        app: {app}
    spec:
      containers:
        - name: main
          image: {image}
"""


def kustomization(*resources: str) -> str:
    lines = ["apiVersion: kustomize.config.k8s.io/v1beta1", "kind: Kustomization", "resources:"]
    lines += [f"  - {r}" for r in resources]
    return "\n".join(lines) + "\n"
