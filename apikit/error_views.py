"""Django's error handlers: JSON in the right API's shape under /api, plain pages elsewhere."""

from __future__ import annotations

from django.http import HttpResponse
from rest_framework.authentication import get_authorization_header

from access import mgmt
from apikit.errors import is_v1_path, json_error


def _page_or_json(request, status: int, message: str):
    if request.path.startswith("/api/") or request.path == "/api":
        return json_error(request.path, status, message)
    return HttpResponse(f"{status} {message}\n", status=status, content_type="text/plain")


def not_found(request, exception=None):
    # An unknown management route answers 401 to a caller without the token, so the route map
    # is not readable without credentials.
    guarded = is_v1_path(request.path) and not mgmt.tokenless()
    if guarded and mgmt.resolve(get_authorization_header(request)) is None:
        return json_error(
            request.path, 401, "invalid or missing bearer token", {"WWW-Authenticate": mgmt.REALM}
        )
    return _page_or_json(request, 404, "not found")


def bad_request(request, exception=None):
    return _page_or_json(request, 400, "bad request")


def forbidden(request, exception=None):
    return _page_or_json(request, 403, "forbidden")


def server_error(request):
    return _page_or_json(request, 500, "internal error")
