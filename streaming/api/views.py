"""Management routes of the machine's GPUs and readiness."""

from __future__ import annotations

from drf_spectacular.utils import OpenApiExample, extend_schema
from rest_framework.response import Response

from apikit.base import MgmtAPIView, json_body
from apikit.schema import error
from media import gpus
from streaming import preflight, services
from streaming.api import serializers as s


class PreflightView(MgmtAPIView):
    @extend_schema(
        responses=s.PreflightSerializer,
        description="Readiness report; changes no display or stream.",
    )
    def get(self, request):
        return Response(preflight.report())


class GpusView(MgmtAPIView):
    @extend_schema(
        responses=s.GpuStateSerializer, description="GPU list, preference, next and live GPU."
    )
    def get(self, request):
        return Response(gpus.gpu_state(services.live_encoders()))


class GpuPreferenceView(MgmtAPIView):
    @extend_schema(
        request=s.GpuPreferenceSerializer,
        responses={200: s.GpuStateSerializer, 500: error("the preference could not be written")},
        examples=[OpenApiExample("manual", value={"mode": "manual", "gpu_id": "10de-2c05-0"})],
    )
    def put(self, request):
        gpus.set_preference(json_body(request))
        return Response(gpus.gpu_state(services.live_encoders()))
