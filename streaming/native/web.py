"""HTTP helpers shared by the player's endpoint and the console relay: JSON errors, a CSRF
check that answers JSON, and the console's admin-session check.

Why our own CSRF wrapper: Django's check is the right one (cookie + `X-CSRFToken`, Origin /
Referer against the host), but its failure view is an HTML 403 page, and both the player page
and the console read every answer as JSON. The wrapper runs the same middleware logic and
only changes the refusal's shape.
"""

from __future__ import annotations

from functools import wraps

from django.http import JsonResponse
from django.middleware.csrf import CsrfViewMiddleware
from django.views.decorators.csrf import csrf_exempt


def json_error(status: int, message: str, **headers) -> JsonResponse:
    response = JsonResponse({"error": message}, status=status)
    for key, value in headers.items():
        response[key.replace("_", "-")] = value
    return response


class _JsonCsrf(CsrfViewMiddleware):
    def _reject(self, request, reason):
        return json_error(403, f"CSRF check failed: {reason}")


def csrf_json(view):
    """Django's CSRF check on unsafe methods, refusing with `403 {"error"}` instead of HTML."""
    checker = _JsonCsrf(lambda request: None)

    @wraps(view)
    def wrapper(request, *args, **kwargs):
        refused = checker.process_view(request, view, args, kwargs)
        if refused is not None:
            return refused
        return view(request, *args, **kwargs)

    return csrf_exempt(wrapper)  # the global middleware would answer HTML first


def is_admin(request) -> bool:
    user = getattr(request, "user", None)
    return bool(user is not None and user.is_authenticated and user.is_superuser)


def admin_json(view):
    """Console relay: the operator's Django session (superuser) and a JSON CSRF check."""

    @wraps(view)
    def wrapper(request, *args, **kwargs):
        if not is_admin(request):
            return json_error(401, "log in to the console first")
        response = view(request, *args, **kwargs)
        response["Cache-Control"] = "no-store"
        return response

    return csrf_json(wrapper)
