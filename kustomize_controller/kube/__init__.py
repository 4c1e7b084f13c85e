"""The Kubernetes client layer: our own async HTTP client on aiohttp (objects are plain dicts).

Modules: ``client`` (``KubeClient``), ``errors`` (the error tree built from ``Status`` bodies),
``config`` (kubeconfig / in-cluster loading, through ``kubeconfig`` for ordinary files), ``clientconfig``
(``ClientConfig`` and the authenticators the loaders build), ``discovery`` (REST mapper), ``transport`` (pluggable
HTTP transport, ``MockTransport`` for tests), ``ratelimit`` (client-side token bucket), ``metrics``
(``rest_client_requests_total``). Sits above ``api`` and below ``runtime``; knows no controller logic.
"""
