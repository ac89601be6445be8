"""Management API views of the hooks app: read and replace the hook configuration."""

from __future__ import annotations

from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import serializers
from rest_framework.response import Response

from hooks import conf, services
from hostmgmt.api.base import MgmtAPIView
from hostmgmt.api.errors import FieldErrors


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


class HooksView(MgmtAPIView):
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
