"""Management API routes of the native plane (`/api/v1/native/...`): thin views over services."""

from __future__ import annotations

from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework.response import Response

from hostmgmt.api.base import MgmtAPIView, json_object
from hostmgmt.api.errors import ApiError
from streaming.native import services


def _optional_body(request) -> dict:
    return json_object(request) if request.body else {}


class PendingListView(MgmtAPIView):
    @extend_schema(responses=OpenApiResponse(description="[PendingDevice]"))
    def get(self, request):
        """Browsers waiting for approval (10 min each, 32 max, 4 per source IP)."""
        return Response(services.pending())


class PendingApproveView(MgmtAPIView):
    @extend_schema(request=None, responses={200: OpenApiResponse(description="NativeClient")})
    def post(self, request, pending_id: int):
        body = _optional_body(request)
        client = services.approve(pending_id, body.get("name"))
        if client is None:
            raise ApiError(404, "no pending device with that id (unknown or expired)")
        return Response(services.client_record(client))


class PendingDenyView(MgmtAPIView):
    @extend_schema(request=None, responses={204: None})
    def post(self, request, pending_id: int):
        if not services.deny(pending_id):
            raise ApiError(404, "no pending device with that id (unknown or expired)")
        return Response(status=204)


class PairView(MgmtAPIView):
    @extend_schema(responses=OpenApiResponse(description="NativePairStatus"))
    def get(self, request):
        return Response(services.pair_status())

    @extend_schema(responses={204: None})
    def delete(self, request):
        services.disarm()
        return Response(status=204)


class PairArmView(MgmtAPIView):
    @extend_schema(request=None, responses=OpenApiResponse(description="NativePairStatus"))
    def post(self, request):
        """Arm a self-pairing PIN for `ttl_secs` (default 120, clamped to 15..600)."""
        body = _optional_body(request)
        fp = body.get("fingerprint")
        if fp is not None and not isinstance(fp, str):
            raise ApiError(400, "fingerprint must be a string")
        try:
            return Response(services.arm(body.get("ttl_secs"), fp))
        except ValueError as exc:
            raise ApiError(400, str(exc)) from None


class NativeClientsView(MgmtAPIView):
    @extend_schema(responses=OpenApiResponse(description="[NativeClient]"))
    def get(self, request):
        return Response([services.client_record(c) for c in services.native_clients()])


class NativeClientView(MgmtAPIView):
    @extend_schema(responses={204: None})
    def delete(self, request, fingerprint: str):
        """Unpair: its session ends now and its next offer is pending again."""
        if not services.FP_RE.match(fingerprint.lower()):
            raise ApiError(400, "fingerprint must be 64 hex characters")
        if not services.unpair(fingerprint):
            raise ApiError(404, "no paired native client with that fingerprint")
        return Response(status=204)
