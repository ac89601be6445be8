"""The console's relay for native pairing (`/console/native/...`): the clients page approves,
denies and arms a PIN with the operator's Django session, never with the management token.

Why a relay rather than the `/api/v1/native` routes: those take the management bearer token,
which must never reach a browser (docs/console.md). These views check the superuser session
and Django's CSRF token (cookie + `X-CSRFToken`, same origin), then call the same service
functions as the API, so events and rules are identical.
"""

from __future__ import annotations

import json

from django.http import HttpResponse, JsonResponse
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from streaming.native import services
from streaming.native.web import admin_json, json_error

MAX_BODY = 4096


def _body(request) -> dict | None:
    """The optional JSON object body; None when it is not one."""
    if not request.body:
        return {}
    if len(request.body) > MAX_BODY:
        return None
    try:
        data = json.loads(request.body)
    except ValueError:
        return None
    return data if isinstance(data, dict) else None


@require_GET
@admin_json
def pending(request):
    return JsonResponse(services.pending(), safe=False)


@require_POST
@admin_json
def approve(request, pending_id: int):
    body = _body(request)
    if body is None:
        return json_error(400, "request body must be a JSON object")
    client = services.approve(pending_id, body.get("name"))
    if client is None:
        return json_error(404, "no pending device with that id (unknown or expired)")
    return JsonResponse(services.client_record(client))


@require_POST
@admin_json
def deny(request, pending_id: int):
    if not services.deny(pending_id):
        return json_error(404, "no pending device with that id (unknown or expired)")
    return HttpResponse(status=204)


@require_http_methods(["GET", "DELETE"])
@admin_json
def pair(request):
    if request.method == "DELETE":
        services.disarm()
    return JsonResponse(services.pair_status())


@require_POST
@admin_json
def arm(request):
    body = _body(request)
    if body is None:
        return json_error(400, "request body must be a JSON object")
    try:
        return JsonResponse(services.arm(body.get("ttl_secs"), body.get("fingerprint")))
    except ValueError as exc:
        return json_error(400, str(exc))
