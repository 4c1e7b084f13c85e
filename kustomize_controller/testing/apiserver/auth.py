"""Authentication (bearer tokens, optional anonymous) and impersonation headers.

Contract:
- ``Authorization: Bearer <token>`` with a known token authenticates as that token's user. A wrong token
  is 401. No token is 401, or — with ``anonymous=True`` — the request runs as ``system:anonymous``
  (group ``system:unauthenticated``), which is authorised for nothing but ``/version`` and the health
  endpoints (403 otherwise), as a real server with anonymous auth and RBAC answers.
- ``Impersonate-User``/``Impersonate-Group``/``Impersonate-Uid`` switch the user when the requester may
  impersonate (members of ``system:masters``, or — with RBAC on — a rule granting ``impersonate`` on
  users/groups/serviceaccounts). An impersonated user is authenticated (``system:authenticated``); a
  service account (``system:serviceaccount:<ns>:<name>``) impersonated without groups gets its usual groups.
"""

from __future__ import annotations

import hmac
from collections.abc import Callable
from dataclasses import dataclass, field

from multidict import CIMultiDictProxy

from . import errors
from .errors import ApiStatusError


@dataclass(frozen=True)
class UserInfo:
    name: str
    groups: tuple[str, ...] = ()
    uid: str = ""
    extra: dict[str, tuple[str, ...]] = field(default_factory=dict, compare=False, hash=False)

    @property
    def is_admin(self) -> bool:
        return "system:masters" in self.groups

    @property
    def anonymous(self) -> bool:
        return self.name == "system:anonymous"


ANONYMOUS = UserInfo("system:anonymous", ("system:unauthenticated",))

# (user, verb, resource, name) -> allowed
ImpersonationCheck = Callable[[UserInfo, str, str, str], bool]


class Authenticator:
    def __init__(self, *, anonymous: bool = False) -> None:
        self._tokens: dict[str, UserInfo] = {}
        self.anonymous = anonymous

    def add_token(self, token: str, user: UserInfo) -> None:
        self._tokens[token] = user

    def authenticate(self, headers: CIMultiDictProxy[str]) -> UserInfo:
        header = headers.get("Authorization", "")
        if not header:
            if self.anonymous:
                return ANONYMOUS
            raise errors.unauthorized()
        scheme, _, token = header.partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            raise errors.unauthorized()
        token = token.strip()
        for known, user in self._tokens.items():
            if hmac.compare_digest(known, token):
                return user
        raise errors.unauthorized()


def impersonate(user: UserInfo, headers: CIMultiDictProxy[str], may: ImpersonationCheck) -> UserInfo:
    target = headers.get("Impersonate-User")
    groups = tuple(headers.getall("Impersonate-Group", ()))
    uid = headers.get("Impersonate-Uid", "")
    if target is None:
        if groups or uid:
            raise errors.ApiStatusError(500, "InternalError", "Internal error occurred: requested "
                                        "impersonation of groups or uid without impersonating a user",
                                        {"causes": [{"message": "requested impersonation without a user"}]})
        return user
    if target.startswith("system:serviceaccount:"):
        ns, _, name = target[len("system:serviceaccount:"):].partition(":")
        _require(may, user, "serviceaccounts", name, ns)
        if not groups:
            groups = ("system:serviceaccounts", f"system:serviceaccounts:{ns}")
    else:
        _require(may, user, "users", target, "")
    for group in groups:
        _require(may, user, "groups", group, "")
    if uid:
        _require(may, user, "uids", uid, "")
    all_groups = groups
    if target != "system:anonymous" and "system:authenticated" not in groups:
        all_groups = (*groups, "system:authenticated")
    return UserInfo(target, all_groups, uid)


def _require(may: ImpersonationCheck, user: UserInfo, resource: str, name: str, namespace: str) -> None:
    if user.is_admin or may(user, "impersonate", resource, name):
        return
    scope = f'in the namespace "{namespace}"' if namespace else "at the cluster scope"
    group = "authentication.k8s.io" if resource == "uids" else ""
    raise errors.forbidden(resource, group, name, f'User "{user.name}" cannot impersonate resource '
                           f'"{resource}" in API group "{group}" {scope}')


__all__ = ["ANONYMOUS", "ApiStatusError", "Authenticator", "UserInfo", "impersonate"]
