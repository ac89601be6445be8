"""Ending the running sessions (both planes) from the management and admin APIs.

Both only ask (`streaming.services.request_stop`): the session task ends itself, so the app's
process group, the prep undo steps, the display and the history record are handled in one
place whatever asked. Each waits briefly so a status read right after sees the session gone.
"""

from __future__ import annotations

from drf_spectacular.utils import extend_schema
from rest_framework.response import Response

from hostmgmt.api import shapes
from hostmgmt.api.base import AdminAPIView, MgmtAPIView
from hostmgmt.api.schema import error
from streaming import services

WAIT_S = 8.0
_NO_MANAGER = {503: error("the session manager or the host's Redis is out of reach")}


class SessionView(MgmtAPIView):
    needs_redis = True

    @extend_schema(
        request=None,
        responses={204: None, **_NO_MANAGER},
        summary="End the running session",
        description="Deliberate stop: the display skips its linger (unless kept forever). "
        "204 whether or not a session was running.",
    )
    def delete(self, request):
        services.end_all_sessions("api", wait_s=WAIT_S)
        return Response(status=204)


class AppsCloseView(AdminAPIView):
    scopes = {"POST": "apps:close"}
    needs_redis = True

    @extend_schema(
        request=None,
        responses={200: shapes.ClosedSerializer, **_NO_MANAGER},
        summary="Close the app",
    )
    def post(self, request):
        services.end_all_sessions("app_closed", wait_s=WAIT_S)
        return Response({"status": True})
