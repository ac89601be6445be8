"""Pairing routes: paired clients on the management API, clients and PIN on the admin API."""

from __future__ import annotations

from drf_spectacular.utils import OpenApiExample, OpenApiResponse, extend_schema
from rest_framework.response import Response

from apikit.base import AdminAPIView, MgmtAPIView, json_object
from apikit.errors import ApiError
from pairing import services
from pairing.api import serializers as s


class ClientsView(MgmtAPIView):
    """Certificate-pinned clients of the compat plane."""

    @extend_schema(responses=s.PairedClientSerializer(many=True))
    def get(self, request):
        return Response(services.client_records())


class ClientView(MgmtAPIView):
    @extend_schema(
        responses={
            204: OpenApiResponse(description="unpaired"),
            400: OpenApiResponse(description="malformed fingerprint"),
            404: OpenApiResponse(description="no paired client with it"),
        }
    )
    def delete(self, request, fingerprint: str):
        """Unpair: the client is refused on its next request to the compat plane."""
        if not services.valid_fingerprint(fingerprint):
            raise ApiError(400, "fingerprint must be 64 hex characters")
        if not services.unpair_fingerprint(fingerprint):
            raise ApiError(404, "no paired client with that fingerprint")
        return Response(status=204)


def _status(ok: bool, error: str = "") -> Response:
    body = {"status": ok, "status_code": 200}
    if not ok and error:
        body["error"] = error
    return Response(body)


def _uuid(body: dict) -> str:
    uuid = body.get("uuid")
    if not isinstance(uuid, str) or not uuid.strip():
        raise ApiError(400, "uuid must be a non-empty string")
    return uuid.strip()


class AdminClientListView(AdminAPIView):
    scopes = {"GET": "clients:list"}

    @extend_schema(responses=s.ClientListSerializer)
    def get(self, request):
        certs = [services.named_cert(c) for c in services.list_clients()]
        return Response({"status": True, "status_code": 200, "named_certs": certs})


class AdminUnpairView(AdminAPIView):
    scopes = {"POST": "clients:unpair"}

    @extend_schema(request=s.UuidSerializer, responses=s.StatusSerializer)
    def post(self, request):
        ok = services.unpair_uuid(_uuid(json_object(request)))
        return _status(ok, "no paired client with that uuid")


class AdminUnpairAllView(AdminAPIView):
    scopes = {"POST": "clients:unpair"}

    @extend_schema(request=None, responses=s.StatusSerializer)
    def post(self, request):
        """Unpair every client and end every running session."""
        services.unpair_all()
        return _status(True)


class AdminClientUpdateView(AdminAPIView):
    """Enable or disable a client; disabling ends its sessions and refuses it until enabled."""

    @extend_schema(request=s.UpdateSerializer, responses=s.StatusSerializer)
    def post(self, request):
        body = json_object(request)
        uuid = _uuid(body)
        enabled = body.get("enabled", True)
        if not isinstance(enabled, bool):
            raise ApiError(400, "enabled must be true or false")
        return _status(services.set_enabled(uuid, enabled), "no paired client with that uuid")


class AdminPinView(AdminAPIView):
    scopes = {"POST": "clients:pair"}

    @extend_schema(
        request=s.PinSerializer,
        responses=s.StatusSerializer,
        examples=[OpenApiExample("pin", value={"pin": "1234", "name": "Living room"})],
    )
    def post(self, request):
        """Complete the handshake of the device waiting for a PIN; status false if none waits."""
        body = json_object(request)
        ok = services.submit_pin(body.get("pin"), body.get("name"))  # PinError: 400
        return _status(ok, "no device is waiting for a PIN")
