"""Ending running sessions (both planes) from the management and admin APIs: one by its id
(`sessions[].id` of GET /api/v1/status), or all of them when no id is given.

Both only ask (`streaming.services`): the session process ends itself, so the app's process
group, the prep undo steps, the display and the history record are handled in one place
whatever asked. Each waits briefly so a status read right after sees the session gone.
"""

from __future__ import annotations

from django.http import QueryDict
from drf_spectacular.utils import OpenApiParameter, extend_schema, inline_serializer
from rest_framework import serializers
from rest_framework.response import Response

from apikit import shapes
from apikit.base import AdminAPIView, ConsoleMgmtAPIView
from apikit.errors import ApiError
from apikit.schema import error
from streaming import services
from streaming.sessions import registry

WAIT_S = 8.0
_NO_MANAGER = {503: error("the session manager or the host's Redis is out of reach")}
MALFORMED = "id must be a session id (8 lowercase hex digits, sessions[].id of GET /status)"
UNKNOWN = "no live session with that id"
_ONE_SESSION = {400: error(MALFORMED), 404: error(UNKNOWN)}


def _end(session_id, reason: str) -> None:
    """End one session (None: all); 400 for a malformed id, 404 for one not live."""
    if session_id is None:
        services.end_all_sessions(reason, wait_s=WAIT_S)
        return
    if not registry.valid_id(session_id):
        raise ApiError(400, MALFORMED)
    if not services.end_session(session_id, reason, wait_s=WAIT_S):
        raise ApiError(404, UNKNOWN)


class SessionView(ConsoleMgmtAPIView):
    """The console dashboard's End button calls this too (the operator's login session)."""

    needs_redis = True

    @extend_schema(
        request=None,
        parameters=[OpenApiParameter("id", str, description="one session's id; omitted: all")],
        responses={204: None, **_ONE_SESSION, **_NO_MANAGER},
        summary="End one running session, or all",
        description="Deliberate stop: the display skips its linger (unless kept forever). "
        "Without `id`: every session, 204 whether or not one was running. With `id`: that "
        "session only; 400 for a malformed id, 404 for one that is not live.",
    )
    def delete(self, request):
        _end(request.query_params.get("id"), "api")
        return Response(status=204)


class AppsCloseView(AdminAPIView):
    scopes = {"POST": "apps:close"}
    needs_redis = True

    @extend_schema(
        request=inline_serializer(
            "AppsCloseRequest", {"id": serializers.CharField(required=False)}
        ),
        responses={200: shapes.ClosedSerializer, **_ONE_SESSION, **_NO_MANAGER},
        summary="Close the app of one session, or of all",
        description='No body, or no `id`: every session. `{"id"}`: that session only; 400 '
        "for a malformed id or body, 404 for a session that is not live.",
    )
    def post(self, request):
        session_id = None
        data = request.data
        if request.stream is not None and not isinstance(data, QueryDict):
            if not isinstance(data, dict):
                raise ApiError(400, "request body must be a JSON object")
            session_id = data.get("id")
            if session_id is not None and not isinstance(session_id, str):
                raise ApiError(400, MALFORMED)
        _end(session_id, "app_closed")
        return Response({"status": True})
