"""Management routes of the machine's displays, monitors, compositors and capture."""

from __future__ import annotations

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiExample, extend_schema
from rest_framework.response import Response

from apikit.base import ConsoleMgmtAPIView, MgmtAPIView, json_body
from apikit.errors import FieldErrors
from apikit.schema import error
from displays import capture, compositors, machine, monitors
from displays import services as displays
from displays.api import serializers as s
from hostconfig import store

_NOT_SAVED = {500: error("the display policy or preset catalog could not be written")}
_STATE = {200: s.DisplaySettingsStateSerializer, **_NOT_SAVED}


class CaptureMethodsView(MgmtAPIView):
    @extend_schema(responses=s.CaptureMethodSerializer(many=True), description="`auto` first.")
    def get(self, request):
        return Response(capture.methods())


class CompositorsView(MgmtAPIView):
    @extend_schema(responses=s.CompositorSerializer(many=True))
    def get(self, request):
        return Response(compositors.compositors(store.get("compositor")))


class HeadlessCompositorsView(MgmtAPIView):
    @extend_schema(responses=s.BackendSerializer(many=True), description="PATH probes.")
    def get(self, request):
        return Response(compositors.headless())


class MonitorsView(MgmtAPIView):
    @extend_schema(
        responses=s.MonitorsSerializer, description="Physical heads of the X server or DRM."
    )
    def get(self, request):
        return Response(monitors.monitors())


class DisplaySettingsView(ConsoleMgmtAPIView):
    @extend_schema(responses=s.DisplaySettingsStateSerializer)
    def get(self, request):
        return Response(displays.settings_state())

    @extend_schema(
        request=OpenApiTypes.OBJECT,
        responses=_STATE,
        examples=[
            OpenApiExample("pin", value={"preset": "custom", "keep_alive": {"mode": "forever"}})
        ],
    )
    def put(self, request):
        return Response(displays.put_settings(json_body(request)))


class DisplayLayoutView(MgmtAPIView):
    @extend_schema(
        request=OpenApiTypes.OBJECT,
        responses=_STATE,
        examples=[
            OpenApiExample(
                "two", value={"positions": {"0": {"x": 0, "y": 0}, "1": {"x": 1920, "y": 0}}}
            )
        ],
    )
    def put(self, request):
        return Response(displays.put_layout(json_body(request)))


class PresetsView(MgmtAPIView):
    @extend_schema(responses=s.PresetSerializer(many=True))
    def get(self, request):
        return Response(displays.list_presets())

    @extend_schema(
        request=OpenApiTypes.OBJECT,
        responses={201: s.PresetSerializer, **_NOT_SAVED},
        examples=[OpenApiExample("couch", value={"name": "Couch", "fields": {}})],
    )
    def post(self, request):
        return Response(displays.create_preset(json_body(request)), status=201)


class PresetView(MgmtAPIView):
    @extend_schema(
        request=OpenApiTypes.OBJECT,
        responses={200: s.PresetSerializer, **_NOT_SAVED},
        examples=[OpenApiExample("rename", value={"name": "Couch 2", "fields": {}})],
    )
    def put(self, request, preset_id: str):
        return Response(displays.update_preset(preset_id, json_body(request)))

    @extend_schema(responses={204: None, **_NOT_SAVED})
    def delete(self, request, preset_id: str):
        displays.delete_preset(preset_id)
        return Response(status=204)


class DisplayReleaseView(ConsoleMgmtAPIView):
    @extend_schema(
        request=s.ReleaseRequestSerializer,
        responses=s.ReleasedSerializer,
        description="`{slot?}`: tear down kept displays (one slot, or all); never active ones.",
    )
    def post(self, request):
        body = request.data if request.stream is not None else {}
        if not isinstance(body, dict):
            raise FieldErrors("invalid release request", {"body": "must be a JSON object"})
        extra = {str(k): "unknown field" for k in body if k != "slot"}
        slot = body.get("slot")
        if slot is not None and (isinstance(slot, bool) or not isinstance(slot, int) or slot < 0):
            extra["slot"] = "must be a non-negative integer"
        if extra:
            raise FieldErrors("invalid release request", extra)
        return Response({"released": machine.release(slot)})


class DisplayStateView(ConsoleMgmtAPIView):
    @extend_schema(responses=s.DisplayStateSerializer, description="Live and kept displays.")
    def get(self, request):
        return Response(machine.state())


_PIN_ERRORS = {
    404: error("no display in that slot"),
    409: error("an attached display, or unpin under the `forever` policy (release it instead)"),
}


def _slot(request) -> int:
    """The `{slot}` body of pin and unpin: an object with one non-negative integer."""
    body = request.data if request.stream is not None else None
    if not isinstance(body, dict):
        raise FieldErrors("invalid request", {"body": "must be a JSON object with `slot`"})
    errors = {str(k)[:64]: "unknown field" for k in body if k != "slot"}
    slot = body.get("slot")
    if isinstance(slot, bool) or not isinstance(slot, int) or not 0 <= slot < 1 << 31:
        errors["slot"] = "required: a non-negative integer"
    if errors:
        raise FieldErrors("invalid request", errors)
    return slot


class DisplayPinView(ConsoleMgmtAPIView):
    @extend_schema(
        request=s.SlotSerializer,
        responses={200: s.VirtualDisplaySerializer, **_PIN_ERRORS},
        examples=[OpenApiExample("slot", value={"slot": 0})],
        description="`{slot}`: keep this display until released. A lingering display is "
        "pinned now; an active one is pinned when its last session leaves (`pin_on_leave`). "
        "200 the display; 400 bad body; 404 no such slot; 409 an attached display.",
    )
    def post(self, request):
        return Response(machine.pin(_slot(request)))


class DisplayUnpinView(ConsoleMgmtAPIView):
    @extend_schema(
        request=s.SlotSerializer,
        responses={200: s.VirtualDisplaySerializer, 204: None, **_PIN_ERRORS},
        examples=[OpenApiExample("slot", value={"slot": 0})],
        description="`{slot}`: back to the keep-alive policy in force now. A pinned display "
        "starts the policy's countdown (200 the display), or is torn down when the policy "
        "keeps nothing (`off`: 204); an active one only loses `pin_on_leave`. 409 when the "
        "policy is `forever` (release the display instead) or for an attached display.",
    )
    def post(self, request):
        display = machine.unpin(_slot(request))
        return Response(status=204) if display is None else Response(display)
