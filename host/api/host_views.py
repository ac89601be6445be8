"""Host routes of both APIs: configuration, the broadcast switch, restart and shutdown."""

from __future__ import annotations

import logging
import os
import threading

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiExample, extend_schema
from rest_framework.response import Response

from apikit import shapes
from apikit.base import AdminAPIView, MgmtAPIView, json_body
from apikit.errors import ApiError
from apikit.schema import error
from common import supervisorctl as supervisor
from host import config_service as service
from hostconfig.schema import exec_keys

log = logging.getLogger(__name__)

# Long enough for daphne to flush the 202 before the supervisor starts stopping children.
SIGNAL_DELAY_S = 0.5

_NOT_WRITTEN = {500: error("the config file could not be written")}
_NO_SUPERVISOR = {409: error("not running under the supervisor (`manage.py runhost`)")}
_STATE = {200: shapes.HostConfigStateSerializer, **_NOT_WRITTEN}

_STATE_DOC = (
    "Host config state: `settings` (the file form), `configured`, `requires_restart` (always "
    "true), `env_path` (the companion env file written on every save), `refused` (dotted field "
    "-> why the host accepts only its default) and `refused_values` (dotted field -> {value: "
    "why}) for the values of an acting field this host cannot do."
)


class HostConfigView(MgmtAPIView):
    @extend_schema(responses=shapes.HostConfigStateSerializer, description=_STATE_DOC)
    def get(self, request):
        return Response(service.v1_state())

    @extend_schema(
        request=OpenApiTypes.OBJECT,
        responses=_STATE,
        description=(
            "Replace the host config file form (sections `general`, `input`, `audio_video`, "
            "`network`, `encoders` and top-level enums). Omitted fields return to defaults; "
            "`network.compat` is ignored (see PUT /host/compat). 400 with `fields` on any bad "
            "value, nothing written; 500 when the file cannot be written."
        ),
        examples=[
            OpenApiExample(
                "frame-rate cap",
                value={"version": 1, "audio_video": {"max_fps": 120}},
            )
        ],
    )
    def put(self, request):
        return Response(service.v1_replace(json_body(request)))


class HostCompatView(MgmtAPIView):
    @extend_schema(
        request=shapes.CompatRequestSerializer,
        responses=_STATE,
        description="`{enabled: bool}`: the compat-plane broadcast switch (on forces mDNS on).",
        examples=[OpenApiExample("on", value={"enabled": True})],
    )
    def put(self, request):
        return Response(service.set_compat(json_body(request)))


def _later(fn) -> None:
    timer = threading.Timer(SIGNAL_DELAY_S, fn)
    timer.daemon = True
    timer.start()


class HostRestartView(MgmtAPIView):
    @extend_schema(request=None, responses={202: None, **_NO_SUPERVISOR})
    def post(self, request):
        pid = os.environ.get("HOST_SUPERVISOR_PID", "")
        if not pid.isdigit():
            raise ApiError(409, "restart cannot be scheduled: not running under the supervisor")
        log.info("restart requested through the management API")
        _later(supervisor.request_restart)
        return Response(status=202)


class HostShutdownView(MgmtAPIView):
    @extend_schema(request=None, responses={202: None})
    def post(self, request):
        if os.environ.get("HOST_SUPERVISOR_PID", "").isdigit():
            log.info("shutdown requested through the management API")
            _later(supervisor.request_shutdown)
        else:
            log.warning("shutdown requested but no supervisor to stop")
        return Response(status=202)


class AdminConfigView(AdminAPIView):
    scopes = {"GET": "config:get", "POST": "config:set"}

    def exec_fields(self, request) -> dict[str, str]:
        body = request.data if request.method == "POST" else None
        return exec_keys(body) if isinstance(body, dict) else {}

    @extend_schema(
        responses={200: shapes.ADMIN_CONFIG},
        description=(
            "`status`, `platform`, `version`, every key with its value; `file_only` (redacted), "
            "`defaults` and `restart_required_keys` alongside; `refused` (key -> why the host "
            "accepts only its default) and `refused_values` (key -> {value: why}) for the values "
            "of an acting key this host cannot do."
        ),
    )
    def get(self, request):
        return Response(service.admin_get())

    @extend_schema(
        request=OpenApiTypes.OBJECT,
        responses={200: shapes.ConfigSavedSerializer, **_NOT_WRITTEN},
        description=(
            "Flat object of key/value pairs merged into the config file; null or '' resets a "
            "key. Arrays (except for list keys), scalars and empty objects are 400. Keys that "
            "run commands or choose files (global_prep_cmd, log_path, file_apps, cert, pkey) "
            "also need the config:exec scope: 403 naming them otherwise."
        ),
        examples=[OpenApiExample("rate cap", value={"rate_cap_pct": 70, "dscp_qos": False})],
    )
    def post(self, request):
        return Response(service.admin_post(json_body(request)))
