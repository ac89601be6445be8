"""Management API views of the hooks app: the hook configuration, a test firing of one hook and
the delivery log. The console calls them with its login session (`ConsoleMgmtAPIView`)."""

from __future__ import annotations

from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import serializers
from rest_framework.response import Response

from apikit.base import ConsoleMgmtAPIView, json_object
from apikit.errors import ApiError, FieldErrors
from hooks import conf, services
from hooks.models import Delivery


class HookFilterSerializer(serializers.Serializer):
    client = serializers.CharField(required=False, help_text="device name")
    fingerprint = serializers.CharField(required=False)
    plane = serializers.ChoiceField(choices=["native", "compat"], required=False)
    app = serializers.CharField(required=False, help_text="`<store>:<id>` or game title")


class HookEntrySerializer(serializers.Serializer):
    on = serializers.CharField(help_text="exact event kind or `<domain>.*`")
    run = serializers.CharField(required=False, help_text="`sh -c` command; event JSON on stdin")
    webhook = serializers.URLField(
        required=False, help_text="http(s) URL; not loopback, localhost or link-local"
    )
    filter = HookFilterSerializer(required=False)
    timeout_s = serializers.IntegerField(required=False, min_value=1, max_value=600, default=30)
    debounce_ms = serializers.IntegerField(required=False, min_value=0, default=0)
    hmac_secret_file = serializers.CharField(
        required=False, help_text="file whose raw bytes key the X-Mgmt-Signature HMAC"
    )


class HookDocumentSerializer(serializers.Serializer):
    hooks = HookEntrySerializer(many=True)


class HooksView(ConsoleMgmtAPIView):
    """The operator's hook configuration (`hooks.json`): whole-document read and replace."""

    @extend_schema(responses=HookDocumentSerializer, summary="Hook configuration")
    def get(self, request):
        return Response(services.get_document())

    @extend_schema(
        request=HookDocumentSerializer,
        responses={
            200: HookDocumentSerializer,
            400: OpenApiResponse(description="invalid document; `fields` names every mistake"),
            500: OpenApiResponse(description="could not be persisted"),
        },
        summary="Replace the hook configuration",
    )
    def put(self, request):
        length = request.META.get("CONTENT_LENGTH") or "0"
        if length.isdigit() and int(length) > conf.HOOKS_DOC_MAX_BYTES:
            raise FieldErrors(
                "invalid hook configuration",
                {"body": f"must be at most {conf.HOOKS_DOC_MAX_BYTES} bytes"},
            )
        return Response(services.replace_document(request.data))


class HookTestInputSerializer(serializers.Serializer):
    index = serializers.IntegerField(min_value=0, help_text="position in `hooks`")


class HookTestEventSerializer(serializers.Serializer):
    seq = serializers.IntegerField(allow_null=True)
    ts_ms = serializers.IntegerField()
    schema = serializers.IntegerField()
    kind = serializers.CharField()
    test = serializers.BooleanField()


class HookTestResultSerializer(serializers.Serializer):
    queued = serializers.ListField(child=serializers.ChoiceField(choices=["run", "webhook"]))
    event = HookTestEventSerializer()


class HookTestView(ConsoleMgmtAPIView):
    """Fire one saved hook now through the hook worker, ignoring its filter and debounce."""

    @extend_schema(
        request=HookTestInputSerializer,
        responses={
            202: HookTestResultSerializer,
            404: OpenApiResponse(description="no hook at that index"),
            409: OpenApiResponse(description="hooks.json is invalid (every hook disabled)"),
            503: OpenApiResponse(description="in-flight cap full, or no broker / Redis"),
        },
        summary="Test-fire a hook",
    )
    def post(self, request):
        body = json_object(request)
        ser = HookTestInputSerializer(data=body)
        if not ser.is_valid():
            raise FieldErrors("invalid test request", {"index": "must be an integer, 0 or more"})
        return Response(services.test_fire(ser.validated_data["index"]), status=202)


class DeliverySerializer(serializers.Serializer):
    id = serializers.IntegerField()
    created = serializers.DateTimeField()
    channel = serializers.ChoiceField(choices=[c for c, _ in Delivery.CHANNELS])
    target = serializers.CharField(help_text="command, or URL without query or credentials")
    event_kind = serializers.CharField()
    event_seq = serializers.IntegerField(allow_null=True, help_text="null for a test firing")
    outcome = serializers.ChoiceField(choices=[o for o, _ in Delivery.OUTCOMES])
    attempt = serializers.IntegerField()
    exit_code = serializers.IntegerField(allow_null=True)
    http_status = serializers.IntegerField(allow_null=True)
    duration_ms = serializers.IntegerField(allow_null=True)
    error = serializers.CharField(allow_blank=True)


class DeliveriesView(ConsoleMgmtAPIView):
    """What hook firings and webhook attempts did, newest first (kept for
    HOST_DELIVERY_RETENTION_DAYS)."""

    @extend_schema(
        parameters=[
            OpenApiParameter("limit", int, description=f"1-{services.DELIVERIES_MAX}, default 100"),
            OpenApiParameter("channel", str, enum=[c for c, _ in Delivery.CHANNELS]),
        ],
        responses=DeliverySerializer(many=True),
        summary="Hook delivery log",
    )
    def get(self, request):
        raw = request.query_params.get("limit", "100")
        if not raw.isdigit() or not 1 <= int(raw) <= services.DELIVERIES_MAX:
            raise ApiError(400, f"limit must be 1 to {services.DELIVERIES_MAX}")
        channel = request.query_params.get("channel") or None
        if channel is not None and channel not in dict(Delivery.CHANNELS):
            raise ApiError(400, "unknown channel")
        return Response(services.list_deliveries(int(raw), channel))
