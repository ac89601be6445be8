"""Management routes of the machine's GPUs and readiness."""

from __future__ import annotations

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiExample, extend_schema
from rest_framework.response import Response

from hostmgmt.api.base import MgmtAPIView, json_body
from media import gpus
from streaming import preflight, services

OBJ = {200: OpenApiTypes.OBJECT}


class PreflightView(MgmtAPIView):
    @extend_schema(responses=OBJ, description="Readiness report; changes no display or stream.")
    def get(self, request):
        return Response(preflight.report())


class GpusView(MgmtAPIView):
    @extend_schema(responses=OBJ, description="GPU list, preference, next and live GPU.")
    def get(self, request):
        return Response(gpus.gpu_state(services.live_encoders()))


class GpuPreferenceView(MgmtAPIView):
    @extend_schema(
        request=OpenApiTypes.OBJECT,
        responses=OBJ,
        examples=[OpenApiExample("manual", value={"mode": "manual", "gpu_id": "10de-2c05-0"})],
    )
    def put(self, request):
        gpus.set_preference(json_body(request))
        return Response(gpus.gpu_state(services.live_encoders()))
