"""Secret-less credentials for the SOPS key services (fluxcd/pkg ``auth``): the controller's own
identity, or a ServiceAccount's through object-level workload identity.

Modules: ``serviceaccount`` (GET a ServiceAccount, TokenRequest, the controller's own
ServiceAccount, JWT claims), ``access`` (upstream's ``GetAccessToken``: the flow, its error
texts and the token-cache key), ``providers`` (the generic/Vault provider and the cloud
providers' annotations, audiences and exchanges).
"""
