"""Admin routes of the live streams' statistics and the session history (`logs:get`)."""

from __future__ import annotations

from drf_spectacular.utils import OpenApiParameter, extend_schema, inline_serializer
from rest_framework import serializers
from rest_framework.response import Response

from apikit import shapes
from apikit.base import AdminAPIView, int_param, ok
from apikit.errors import ApiError
from apikit.schema import error
from streaming import history, stats
from streaming.sessions import registry


def _summary(name: str):
    return inline_serializer(
        name,
        {
            "min": serializers.FloatField(allow_null=True),
            "max": serializers.FloatField(allow_null=True),
            "avg": serializers.FloatField(allow_null=True),
            "samples": serializers.IntegerField(),
        },
    )


_Latency = inline_serializer(
    "LatencyResponse",
    {
        "status": serializers.BooleanField(),
        "status_code": serializers.IntegerField(),
        "capture_ms": _summary("CaptureLatency"),
        "encode_ms": _summary("EncodeLatency"),
    },
)


_SESSION_PARAM = OpenApiParameter(
    "session",
    str,
    description="one live session's id (8 hex digits, sessions[].id of GET "
    "/api/v1/status); omitted: every live session's figures merged",
)


_BAD_SESSION_ID = "session must be a session id (8 lowercase hex digits)"
_BAD_SESSION = {400: error(_BAD_SESSION_ID)}


def _session_param(request) -> str | None:
    """`?session=`: None (all sessions merged) or a well-formed id; 400 otherwise."""
    session = request.query_params.get("session")
    if session is not None and not registry.valid_id(session):
        raise ApiError(400, _BAD_SESSION_ID)
    return session


class LatencyView(AdminAPIView):
    scopes = {"GET": "logs:get"}

    @extend_schema(
        parameters=[_SESSION_PARAM],
        responses={200: _Latency, **_BAD_SESSION},
        summary="Capture and encode latency of the live streams (ms)",
        description="Over each session's last 600 frames, every live session merged or one "
        "with `?session=`; `samples` 0 and null numbers when no stream (or no such session). "
        "400 for a malformed session id.",
    )
    def get(self, request):
        return Response(ok(**stats.latency(_session_param(request))))


class NetworkStatsView(AdminAPIView):
    scopes = {"GET": "logs:get"}

    @extend_schema(
        parameters=[_SESSION_PARAM],
        responses={200: shapes.NetworkStatsSerializer, **_BAD_SESSION},
        summary="Adaptive-bitrate network feedback of the live streams",
        description="`network{window_s, samples[{ts_ms, session_id, rtt_ms, loss_pct, "
        "bitrate_kbps, target_kbps}], rtt_ms, loss_pct, bitrate_kbps, target_kbps}` where each "
        "named field is `{min, max, avg, samples}`: every live session's samples merged "
        "(oldest first), or one session's with `?session=`; empty when no stream runs. 400 for "
        "a malformed session id.",
    )
    def get(self, request):
        return Response(ok(network=stats.network(_session_param(request))))


def _record(row) -> dict:
    return {"id": row.pk, **row.as_record()}


class SessionsView(AdminAPIView):
    scopes = {"GET": "logs:get"}

    @extend_schema(
        parameters=[
            OpenApiParameter("limit", int, description="1-1000, default 100; larger clamps"),
            OpenApiParameter("app", str, description="exact app name"),
            OpenApiParameter("client", str, description="exact client name"),
            OpenApiParameter(
                "session",
                str,
                description="a session id (8 hex digits): the records of that session's streams",
            ),
        ],
        responses=shapes.SessionListSerializer,
        summary="Session history, newest first",
        description="`{status, status_code, sessions[record + id]}`: one record per stream "
        "(a resumed session leaves one per stream, each with its `session_id`). 400 for a limit "
        "below 1 or not an integer, or a malformed `session`.",
    )
    def get(self, request):
        limit = int_param(request, "limit", history.LIMIT_DEFAULT, 1, history.LIMIT_MAX)
        app = request.query_params.get("app", "")[:256]
        client = request.query_params.get("client", "")[:256]
        session = request.query_params.get("session", "")
        if session and not registry.valid_id(session):
            raise ApiError(400, _BAD_SESSION_ID)
        rows = history.recent(limit, app=app, client=client, session=session)
        return Response(ok(sessions=[_record(r) for r in rows]))


class SessionDetailView(AdminAPIView):
    scopes = {"GET": "logs:get"}

    @extend_schema(
        responses={200: shapes.SessionDetailSerializer, 404: error("no session with that id")},
        operation_id="session_detail",
        summary="One session with its per-second samples (for the console chart)",
        description="`{status, status_code, session{record, id, samples[{t, bitrate_kbps, "
        "rtt_ms, encode_ms}]}}`; 404 unknown id.",
    )
    def get(self, request, record_id: int):
        row = history.get(record_id)
        if row is None:
            raise ApiError(404, "no session with that id")
        return Response(ok(session={**_record(row), "samples": row.samples}))
