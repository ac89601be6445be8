"""Native pairing routes (`/api/v1/native/...`): thin views over `pairing.native`.

The web console's clients page calls these same routes with the operator's session (and
Django's CSRF token on writes) instead of the management token: `ConsoleMgmtAPIView`.
"""

from __future__ import annotations

from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework.response import Response

from hostmgmt.api.base import ConsoleMgmtAPIView, json_object
from pairing import native


def _optional_body(request) -> dict:
    return json_object(request) if request.body else {}


class PendingListView(ConsoleMgmtAPIView):
    @extend_schema(responses=OpenApiResponse(description="[PendingDevice]"))
    def get(self, request):
        """Browsers waiting for approval (10 min each, 32 max, 4 per source IP)."""
        return Response(native.pending())


class PendingApproveView(ConsoleMgmtAPIView):
    @extend_schema(request=None, responses={200: OpenApiResponse(description="NativeClient")})
    def post(self, request, pending_id: int):
        body = _optional_body(request)
        return Response(native.client_record(native.approve(pending_id, body.get("name"))))


class PendingDenyView(ConsoleMgmtAPIView):
    @extend_schema(request=None, responses={204: None})
    def post(self, request, pending_id: int):
        native.deny(pending_id)
        return Response(status=204)


class PairView(ConsoleMgmtAPIView):
    @extend_schema(responses=OpenApiResponse(description="NativePairStatus"))
    def get(self, request):
        return Response(native.pair_status())

    @extend_schema(responses={204: None})
    def delete(self, request):
        native.disarm()
        return Response(status=204)


class PairArmView(ConsoleMgmtAPIView):
    @extend_schema(request=None, responses=OpenApiResponse(description="NativePairStatus"))
    def post(self, request):
        """Arm a self-pairing PIN for `ttl_secs` (default 120, clamped to 15..600)."""
        body = _optional_body(request)
        return Response(native.arm(body.get("ttl_secs"), body.get("fingerprint")))


class NativeClientsView(ConsoleMgmtAPIView):
    @extend_schema(responses=OpenApiResponse(description="[NativeClient]"))
    def get(self, request):
        return Response([native.client_record(c) for c in native.native_clients()])


class NativeClientView(ConsoleMgmtAPIView):
    @extend_schema(responses={204: None})
    def delete(self, request, fingerprint: str):
        """Unpair: its session ends now and its next offer is pending again."""
        native.unpair(fingerprint)
        return Response(status=204)
