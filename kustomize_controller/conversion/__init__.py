"""The conversion webhook that lets the API server serve old Kustomization versions (issue 18).

Modules: ``review`` (ConversionReview in → out, pure, on ``api.conversion``), ``certs`` (the private
CA and serving certificate, pure), ``secret`` (the Secret all replicas share), ``crd`` (``caBundle``
and ``url`` of the CRD's conversion), ``webhook`` (the HTTPS server, a manager runnable).
Import from the modules, not from this package.
"""
