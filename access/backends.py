"""The Django authentication backend: the admin password, through the failed-login bucket.

The Django admin (`/admin/login/`) checks the same password as HTTP Basic and the console
login, so it must count against, and be refused by, the same per-IP bucket; otherwise it is an
unthrottled side door for guessing the password the other routes protect.
"""

from __future__ import annotations

from django.contrib.auth.backends import ModelBackend
from django.core.exceptions import PermissionDenied

from access import credentials, throttle

BACKEND = "access.backends.ThrottledPasswordBackend"


def request_ip(request) -> str:
    meta = getattr(request, "META", None) or {}
    return meta.get("REMOTE_ADDR", "") or "unknown"


class ThrottledPasswordBackend(ModelBackend):
    def authenticate(self, request, username=None, password=None, **kwargs):
        if username is None or password is None:
            return None
        ip = request_ip(request)
        try:
            if throttle.blocked_for(ip):
                # Stops Django trying any other backend; the login form shows its usual error.
                raise PermissionDenied("too many failed logins")
            user = credentials.verify(username, password)
            if user is None or not self.user_can_authenticate(user):
                throttle.record_failure(ip)
                return None
            throttle.record_success(ip)
        except throttle.ThrottleUnavailable:
            # Fail closed: an attempt that cannot be counted is refused (docs/host-state.md).
            raise PermissionDenied("failed logins cannot be counted") from None
        return user
