"""kustomize-controller for Python: a drop-in re-implementation of the Flux kustomize-controller."""

__version__ = "0.1.0"
