"""The differential conformance run: the same cases under upstream's kustomize-controller and ours.

``python -m conformance`` (``make differential``): see ``conformance/README.md``.
"""
