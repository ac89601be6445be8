"""Cross-cutting HTTP rules applied to every response and every non-management request."""

from __future__ import annotations

from access import origin
from apikit.errors import is_v1_path, json_error

HSTS = "max-age=31536000"
FRAME_POLICY = "frame-ancestors 'none'"


class SecurityHeadersMiddleware:
    """HSTS, X-Frame-Options and a frame-ancestors policy on every response."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        response = self.get_response(request)
        response.setdefault("Strict-Transport-Security", HSTS)
        response["X-Frame-Options"] = "DENY"
        csp = response.get("Content-Security-Policy")
        if not csp:
            response["Content-Security-Policy"] = FRAME_POLICY
        elif "frame-ancestors" not in csp:
            response["Content-Security-Policy"] = f"{csp}; {FRAME_POLICY}"
        response.setdefault("X-Content-Type-Options", "nosniff")
        return response


class OriginClassMiddleware:
    """`origin_web_ui_allowed`: the web UI and admin API answer only callers close enough.

    The management API is exempt: it has its own token and is meant for scripts anywhere.
    """

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        if not is_v1_path(request.path) and not origin.allowed(request.META.get("REMOTE_ADDR", "")):
            return json_error(request.path, 403, "origin not allowed")
        return self.get_response(request)
