"""Admin and management routes of the operator console: scoped tokens, logs, updater status,
host restart, the runtime snapshot and the Windows-only routes' Linux answers.
"""

from __future__ import annotations

from pathlib import Path

from django.conf import settings
from django.http import HttpResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import (
    OpenApiExample,
    OpenApiParameter,
    extend_schema,
    inline_serializer,
)
from rest_framework import serializers
from rest_framework.response import Response

from access.admin import AdminPrincipal
from apikit import shapes
from apikit.base import AdminAPIView, ConsoleMgmtAPIView, MgmtAPIView, int_param, json_object, ok
from apikit.errors import ApiError
from apikit.schema import error
from console import logfile, platform, runtime, telemetry, tokens, update_apply, updater


def _token_fields() -> dict:
    return {
        "name": serializers.CharField(),
        "scopes": serializers.ListField(child=serializers.CharField()),
    }


_TokenList = inline_serializer(
    "TokenList",
    {
        "status": serializers.BooleanField(),
        "status_code": serializers.IntegerField(),
        "tokens": inline_serializer("TokenItem", _token_fields(), many=True),
    },
)
_TokenMint = inline_serializer("TokenMintRequest", _token_fields())
_TokenMinted = inline_serializer(
    "TokenMinted",
    {
        "status": serializers.BooleanField(),
        "status_code": serializers.IntegerField(),
        "name": serializers.CharField(),
        "scopes": serializers.ListField(child=serializers.CharField()),
        "token": serializers.CharField(help_text="64 hex; shown in this response only"),
    },
)


def _reach(principal: AdminPrincipal) -> frozenset[str] | None:
    """The scopes bounding what a caller may grant, see and revoke; None for an admin."""
    return None if principal.is_admin else principal.scopes


class TokensView(AdminAPIView):
    """Scoped API tokens. Admin or `tokens:manage`; a token holder can only grant scopes it
    holds, and only sees and revokes tokens whose scopes are a subset of its own."""

    scopes = {"GET": "tokens:manage", "POST": "tokens:manage"}

    @extend_schema(
        responses=_TokenList,
        summary="List scoped tokens (hashes never shown)",
        description="A non-admin caller sees only tokens whose scopes it holds all of.",
    )
    def get(self, request):
        return Response(ok(tokens=tokens.list_tokens(_reach(request.user))))

    @extend_schema(
        request=_TokenMint,
        responses=_TokenMinted,
        examples=[OpenApiExample("logs reader", value={"name": "grafana", "scopes": ["logs:get"]})],
        summary="Mint a scoped token",
        description="400: malformed name, unknown scope or duplicate name. 403: a non-admin "
        "caller asked for a scope it does not hold.",
    )
    def post(self, request):
        body = json_object(request)
        principal: AdminPrincipal = request.user
        granted_by = _reach(principal)
        name, scopes = body.get("name"), body.get("scopes")
        plaintext = tokens.mint(name, scopes, granted_by=granted_by)
        return Response(ok(name=name, scopes=list(dict.fromkeys(scopes)), token=plaintext))


class TokenDetailView(AdminAPIView):
    scopes = {"DELETE": "tokens:manage"}

    @extend_schema(
        responses={200: shapes.TokenRevokedSerializer, 400: error("malformed token name")},
        summary="Revoke a token (effective on the next request)",
        description="400 malformed name; 404 no token with that name, or (for a non-admin "
        "caller) one holding a scope the caller lacks.",
    )
    def delete(self, request, name: str):
        tokens.revoke(name, _reach(request.user))
        return Response(ok())


class AdminLogsView(AdminAPIView):
    """The host's own log as text, newest last: at most the last 256 KiB, secrets masked."""

    scopes = {"GET": "logs:get"}

    @extend_schema(responses={(200, "text/plain"): OpenApiTypes.STR}, summary="Host log (text)")
    def get(self, request):
        response = HttpResponse(logfile.tail_text(), content_type="text/plain; charset=utf-8")
        response["Cache-Control"] = "no-store"
        return response


_LogPage = inline_serializer(
    "LogPage",
    {
        "entries": inline_serializer(
            "LogEntry",
            {
                "seq": serializers.IntegerField(),
                "ts_ms": serializers.IntegerField(),
                "level": serializers.CharField(),
                "target": serializers.CharField(),
                "msg": serializers.CharField(),
            },
            many=True,
        ),
        "next": serializers.IntegerField(),
        "dropped": serializers.BooleanField(),
    },
)


class V1LogsView(MgmtAPIView):
    @extend_schema(
        parameters=[
            OpenApiParameter("after", int, description="return entries with seq above this"),
            OpenApiParameter("limit", int, description="1-1000 (default 1000; larger clamps)"),
        ],
        responses=_LogPage,
        summary="Host log entries, oldest first",
        description="seq values are positions in the log history: monotonic, not contiguous. "
        "Pass `next` back as `after` to page. `dropped` means entries after `after` rotated "
        "away. 400 for a negative or non-integer parameter.",
    )
    def get(self, request):
        after = int_param(request, "after", 0, 0, 2**63 - 1)
        limit = int_param(request, "limit", logfile.PAGE_DEFAULT, 1, logfile.PAGE_MAX)
        return Response(logfile.page(after, limit))


_UPDATE_DOC = (
    "`refused` (string or null) says why no update can be reported at all: checks disabled "
    "(UPDATE_CHECK=0), no release signing key pinned in this build (none is published yet, so "
    "every manifest is refused), or no or an invalid `update_manifest_url`."
)


class AdminUpdateView(AdminAPIView):
    scopes = {"GET": "config:get"}

    @extend_schema(
        responses=shapes.AdminUpdateStatusSerializer,
        summary="Updater status (report only; no apply on this host)",
        description=_UPDATE_DOC,
    )
    def get(self, request):
        return Response(ok(**updater.status()))


class V1UpdateStatusView(MgmtAPIView):
    @extend_schema(
        responses=shapes.UpdateStatusSerializer, summary="UpdateStatus", description=_UPDATE_DOC
    )
    def get(self, request):
        return Response(updater.status())


class V1UpdateCheckView(MgmtAPIView):
    @extend_schema(
        request=None,
        responses={
            200: shapes.UpdateStatusSerializer,
            409: error("update checks are disabled (UPDATE_CHECK=0)"),
            429: error("checked less than 30 s ago (`Retry-After`)"),
        },
        summary="Check the release manifest now",
        description="409 checks disabled; 429 checked less than 30 s ago.",
    )
    def post(self, request):
        return Response(updater.check(force=True))


class _ApplyRequest(serializers.Serializer):
    force = serializers.BooleanField(required=False, default=False)


class _ApplyJob(serializers.Serializer):
    id = serializers.CharField()
    state = serializers.CharField()
    to = serializers.CharField()


class V1UpdateApplyView(ConsoleMgmtAPIView):  # the dashboard's Apply button too
    @extend_schema(
        request=_ApplyRequest,
        responses={
            202: _ApplyJob,
            400: error("malformed body"),
            409: error("a session is live (unless forced), no newer release, or a job runs"),
        },
        summary="Apply the announced release",
        description="Full admin only (the plugin token gets 403). 202: the job runs in the "
        "background (download, verify, stage, back up, switch, restart on probation, health "
        "gate, rollback on failure); its log is `job` in UpdateStatus (docs/updates.md).",
    )
    def post(self, request):
        # No body is no force; a body must be an object whose `force` (if any) is a boolean.
        body = request.data if request.data else {}
        if not isinstance(body, dict):
            raise ApiError(400, "request body must be a JSON object")
        force = body.get("force", False)
        if not isinstance(force, bool):
            raise ApiError(400, "force must be a boolean")
        manifest = updater.load_state().get("manifest")
        root = Path(settings.BASE_DIR)
        journal = update_apply.start(force, manifest if isinstance(manifest, dict) else None, root)
        return Response({"id": journal["id"], "state": journal["state"], "to": journal["to"]},
                        status=202)  # fmt: skip


_Size = {
    "width": serializers.IntegerField(),
    "height": serializers.IntegerField(),
    "fps": serializers.IntegerField(),
}
_StreamInfo = {
    **_Size,
    "bitrate_kbps": serializers.IntegerField(),
    "packet_size": serializers.IntegerField(),
    "min_fec": serializers.IntegerField(),
    "codec": serializers.CharField(),
    "time_to_first_frame_ms": serializers.IntegerField(allow_null=True),
    "last_resize_ms": serializers.IntegerField(allow_null=True),
}
_RuntimeStatus = inline_serializer(
    "RuntimeStatus",
    {
        "video_streaming": serializers.BooleanField(),
        "audio_streaming": serializers.BooleanField(),
        "pin_pending": serializers.BooleanField(),
        "paired_clients": serializers.IntegerField(),
        "native_paired_clients": serializers.IntegerField(),
        "active_sessions": serializers.IntegerField(help_text="streaming sessions, both planes"),
        "max_sessions": serializers.IntegerField(
            allow_null=True, help_text="the most sessions both planes admit at once"
        ),
        "session": inline_serializer(
            "SessionInfo", _Size, allow_null=True, help_text="one representative live session"
        ),
        "stream": inline_serializer("StreamInfo", _StreamInfo, allow_null=True),
        "games": inline_serializer(
            "ActiveGame",
            {
                "session_id": serializers.CharField(required=False),
                "client": serializers.CharField(allow_blank=True),
                "app_id": serializers.CharField(required=False),
                "title": serializers.CharField(allow_blank=True),
                "store": serializers.CharField(required=False),
                "plane": serializers.CharField(),
                "state": serializers.CharField(),
                "grace_remaining_s": serializers.IntegerField(required=False),
            },
            many=True,
        ),
        "sessions": inline_serializer(
            "LiveSession",
            {
                "id": serializers.CharField(help_text="8 hex digits"),
                "plane": serializers.CharField(),
                "client": serializers.CharField(allow_blank=True),
                "client_id": serializers.CharField(allow_blank=True),
                "app": serializers.CharField(allow_blank=True),
                "app_title": serializers.CharField(allow_blank=True),
                "mode": serializers.CharField(),
                "state": serializers.CharField(),
                "t_start": serializers.FloatField(help_text="unix seconds"),
                "stream": inline_serializer("LiveSessionStream", _StreamInfo, allow_null=True),
            },
            many=True,
        ),
        "kept_displays": serializers.IntegerField(),
        "host": inline_serializer(
            "StatusHost",
            {"version": serializers.CharField(), "uptime": serializers.IntegerField()},
        ),
    },
)


class V1StatusView(MgmtAPIView):
    @extend_schema(
        responses={200: _RuntimeStatus},
        summary="RuntimeStatus snapshot",
        description="`sessions[]` lists every live session of both planes (its `id` is what "
        "`DELETE /session?id=` takes); `session`/`stream` describe one of them (the reference "
        "shape); `games` has one row per session plus kept and waiting games.",
    )
    def get(self, request):
        return Response(runtime.snapshot())


class RestartView(AdminAPIView):
    """Admin only; the host restarts half a second after this answer."""

    @extend_schema(
        request=None,
        responses={
            200: shapes.RestartingSerializer,
            409: error("not running under the supervisor (`manage.py runhost`)"),
        },
        summary="Restart host",
    )
    def post(self, request):
        try:
            platform.schedule_restart()
        except platform.RestartUnavailable as exc:
            raise ApiError(409, str(exc)) from None
        return Response(ok(restarting=True))


class VigemStatusView(AdminAPIView):
    scopes = {"GET": "config:get"}

    @extend_schema(
        responses=shapes.VigemStatusSerializer,
        summary="Gamepad driver status (Windows only)",
        description="On Linux: 200 with `status: false`, an `error` and empty driver values.",
    )
    def get(self, request):
        return Response(platform.vigembus_status())


_WINDOWS_ONLY = error("Windows only: this route does nothing on Linux; `error` says why")


class VigemInstallView(AdminAPIView):
    @extend_schema(
        request=None,
        responses={404: _WINDOWS_ONLY},
        summary="Install the gamepad driver (Windows only)",
        description="On Linux always 404 `{status: false, status_code: 404, error}`, the "
        "error starting with `Windows only`: the route exists for clients of the reference "
        "host, and a 4xx says the request cannot succeed here (a 5xx would say try again).",
    )
    def post(self, request):
        raise ApiError(404, platform.windows_only("vigembus"))


class ResetDisplayPersistenceView(AdminAPIView):
    scopes = {"POST": "display:reset"}

    @extend_schema(
        request=None,
        responses={404: _WINDOWS_ONLY},
        summary="Reset display device persistence (Windows only)",
        description="On Linux always 404 `{status: false, status_code: 404, error}`, the "
        "error starting with `Windows only`.",
    )
    def post(self, request):
        raise ApiError(404, platform.windows_only("display"))


_Series = serializers.ListField(child=serializers.FloatField())
_Telemetry = inline_serializer(
    "TelemetryResponse",
    {
        "status": serializers.BooleanField(),
        "status_code": serializers.IntegerField(),
        "telemetry": inline_serializer(
            "Telemetry",
            {
                "host_cpu_pct": _Series,
                "host_gpu_pct": _Series,
                "host_ram_used_mb": _Series,
                "window_s": serializers.IntegerField(),
            },
        ),
    },
)


class TelemetryView(AdminAPIView):
    scopes = {"GET": "logs:get"}

    @extend_schema(
        responses=_Telemetry,
        summary="Host CPU, GPU and RAM over the last two minutes (oldest first)",
        description="Sampled every 2 s by the supervisor. `host_gpu_pct` is empty on hosts "
        "without NVML or a DRM `gpu_busy_percent`; every series is empty when no sampler runs.",
    )
    def get(self, request):
        return Response(ok(telemetry=telemetry.read()))
