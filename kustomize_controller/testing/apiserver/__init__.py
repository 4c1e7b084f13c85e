"""An embedded Kubernetes API server for tests and local runs (in the spirit of envtest).

Real HTTP on 127.0.0.1 with the real server's paths, status codes, ``Status`` bodies, resourceVersion,
watch, list, patch and server-side apply semantics; see ``docs/testing.md`` for what is faithful and what
is approximated. Public surface: ``ApiServer`` (lifecycle, url/token/kubeconfig_path, ``faults``,
``requests``), ``FaultInjector``, ``RequestLog``/``RequestRecord``, ``UserInfo``.
"""

from .auth import UserInfo
from .faults import FaultInjector
from .requestlog import RequestLog, RequestRecord
from .server import ApiServer

__all__ = ["ApiServer", "FaultInjector", "RequestLog", "RequestRecord", "UserInfo"]
