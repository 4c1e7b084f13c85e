"""The controller runtime, after client-go and controller-runtime; knows nothing about Kustomizations.

Modules: ``clock``, ``store`` + ``informer`` (reflector, cache, handlers), ``workqueue`` + ``ratelimit``,
``controller`` (workers, ``Request``/``Result``/``TerminalError``), ``leader`` (Lease election),
``events`` (core/v1 Event recorder), ``metrics`` (our registry), ``health`` (probes), ``logs``
(structlog setup) and ``manager`` (owns every long-lived task). See ``docs/architecture.md``.
"""
