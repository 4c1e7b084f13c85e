"""API models of kustomize-controller: pydantic v2, no I/O, nothing else of the package imported.

Modules: ``kustomization`` (the Kustomization v1 API), ``source`` (read side of Flux sources),
``meta`` (conditions, reasons, label/annotation keys, shared reference types), ``inventory``
(inventory ids), ``duration`` (Go durations), ``base`` (validation modes and error messages),
``crdgen`` (the CRD generated from the models). Import from the modules, not from this package.
"""
