"""Native pairing routes (`/api/v1/native/...`): thin views over `pairing.native`.

The web console's clients page calls these same routes with the operator's session (and
Django's CSRF token on writes) instead of the management token: `ConsoleMgmtAPIView`.
"""

from __future__ import annotations

from drf_spectacular.utils import extend_schema
from rest_framework.response import Response

from apikit.base import ConsoleMgmtAPIView, json_object
from apikit.schema import error
from pairing import native
from pairing.api import serializers as s

_GONE = {404: error("no device with that id is waiting")}


def _optional_body(request) -> dict:
    return json_object(request) if request.body else {}


class PendingListView(ConsoleMgmtAPIView):
    needs_redis = True

    @extend_schema(responses=s.PendingDeviceSerializer(many=True))
    def get(self, request):
        """Browsers waiting for approval (10 min each, 32 max, 4 per source IP)."""
        return Response(native.pending())


class PendingApproveView(ConsoleMgmtAPIView):
    needs_redis = True

    @extend_schema(request=s.ApproveSerializer, responses={200: s.NativeClientSerializer, **_GONE})
    def post(self, request, pending_id: int):
        body = _optional_body(request)
        return Response(native.client_record(native.approve(pending_id, body.get("name"))))


class PendingDenyView(ConsoleMgmtAPIView):
    needs_redis = True

    @extend_schema(request=None, responses={204: None, **_GONE})
    def post(self, request, pending_id: int):
        native.deny(pending_id)
        return Response(status=204)


class PairView(ConsoleMgmtAPIView):
    needs_redis = True

    @extend_schema(responses=s.NativePairStatusSerializer)
    def get(self, request):
        return Response(native.pair_status())

    @extend_schema(responses={204: None})
    def delete(self, request):
        native.disarm()
        return Response(status=204)


class PairArmView(ConsoleMgmtAPIView):
    needs_redis = True

    @extend_schema(request=s.ArmSerializer, responses=s.NativePairStatusSerializer)
    def post(self, request):
        """Arm a self-pairing PIN for `ttl_secs` (default 120, clamped to 15..600)."""
        body = _optional_body(request)
        return Response(native.arm(body.get("ttl_secs"), body.get("fingerprint")))


class NativeClientsView(ConsoleMgmtAPIView):
    @extend_schema(responses=s.NativeClientSerializer(many=True))
    def get(self, request):
        return Response([native.client_record(c) for c in native.native_clients()])


class NativeClientView(ConsoleMgmtAPIView):
    needs_redis = True  # the revocation ends its live session through the registry

    @extend_schema(
        responses={
            204: None,
            400: error("fingerprint is not 64 hex characters"),
            404: error("no paired native client with that fingerprint"),
        }
    )
    def delete(self, request, fingerprint: str):
        """Unpair: its session ends now and its next offer is pending again."""
        native.unpair(fingerprint)
        return Response(status=204)
