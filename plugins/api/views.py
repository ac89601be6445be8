"""`/api/v1/plugins...` (registrations) and `/api/v1/store/runtime` (the runner's switch).

Thin: the rules live in plugins.registry and plugins.runtime. Who may call what is decided
before the view (access/mgmt.py: a plugin's own token reaches its own id only).
"""

from __future__ import annotations

from django.http import HttpResponse
from drf_spectacular.utils import extend_schema
from rest_framework.response import Response

from apikit.base import ConsoleMgmtAPIView, MgmtAPIView, json_body
from apikit.schema import error
from plugins import registry, runner_control, runtime
from plugins.api import serializers as s

_BAD_ID = {400: error("plugin id is not [a-z][a-z0-9-]*, at most 64 characters")}


class PluginsView(ConsoleMgmtAPIView):
    needs_redis = True

    @extend_schema(
        responses=s.PluginSummarySerializer(many=True),
        description="Live registrations, sorted by title then id; never a secret.",
    )
    def get(self, request):
        return Response(registry.summaries())


class PluginView(ConsoleMgmtAPIView):
    needs_redis = True

    @extend_schema(
        request=s.PluginRegistrationSerializer,
        responses={
            204: None,
            400: error(
                "invalid id or registration (fields named); `ui.port` also when the port is not "
                "listened on by this plugin's own process under the runner"
            ),
        },
        description="Register or renew (lease 90 s; re-PUT about every 30 s). A `ui.port` "
        "must be a loopback port the plugin's own process (or a descendant) listens on.",
    )
    def put(self, request, plugin_id: str):
        registry.register(plugin_id, json_body(request), port_check=runner_control.ui_port_error)
        return HttpResponse(status=204)

    @extend_schema(responses={204: None, **_BAD_ID}, description="Idempotent deregistration.")
    def delete(self, request, plugin_id: str):
        registry.unregister(plugin_id)
        return HttpResponse(status=204)


class UiCredentialView(MgmtAPIView):
    """Bearer only (not the console session): the secret never reaches a browser."""

    needs_redis = True

    @extend_schema(
        responses={
            200: s.UiCredentialSerializer,
            **_BAD_ID,
            404: error("no live plugin with that id, or it serves no UI"),
        }
    )
    def get(self, request, plugin_id: str):
        response = Response(registry.ui_credential(plugin_id))
        response["Cache-Control"] = "no-store"
        return response


class RuntimeView(ConsoleMgmtAPIView):
    @extend_schema(responses=s.RuntimeViewSerializer)
    def get(self, request):
        return Response(runtime.view())

    @extend_schema(
        request=s.RuntimeRequestSerializer,
        responses={200: s.RuntimeViewSerializer, 400: error("`enabled` is not a boolean")},
    )
    def post(self, request):
        ser = s.RuntimeRequestSerializer(data=json_body(request))
        ser.is_valid(raise_exception=True)
        return Response(runtime.switch(ser.validated_data["enabled"]))
