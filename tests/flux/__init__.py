"""Flux's own parts beside our controller, from binaries in ``FLUX_ASSETS`` (nothing here builds them).

``FLUX_ASSETS`` names a directory holding some of ``source-controller``, ``notification-controller``,
``kustomize-controller`` (upstream's, for the differential runs) and ``flux`` (the CLI), and a ``crds/``
directory with the CRDs of those controllers (in real life: the binaries and ``install.yaml`` of Flux's
releases). ``assets.py`` finds them; ``process.py`` runs a controller out of cluster on loopback.
"""
