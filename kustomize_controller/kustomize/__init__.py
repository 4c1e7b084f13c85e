"""kustomize."""
