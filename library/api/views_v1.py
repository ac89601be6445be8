"""Management API routes of the library (`/api/v1/library*`); the console calls them with its
login session (`ConsoleMgmtAPIView`), art images included."""

from __future__ import annotations

from django.http import HttpResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import (
    OpenApiParameter,
    OpenApiResponse,
    extend_schema,
)
from rest_framework.response import Response

from apikit.base import ConsoleMgmtAPIView
from apikit.errors import ApiError
from apikit.schema import error
from library import art, services, tasks
from library.api import serializers as s


def _valid(serializer_class, data, **kwargs):
    ser = serializer_class(data=data, **kwargs)
    ser.is_valid(raise_exception=True)
    return ser.validated_data


class LibraryView(ConsoleMgmtAPIView):
    @extend_schema(
        parameters=[
            OpenApiParameter("provider", str, description="entries owned by this provider"),
            OpenApiParameter("platform", str, description="platform, any case"),
        ],
        responses=s.GameEntrySerializer(many=True),
    )
    def get(self, request):
        provider = request.query_params.get("provider") or None
        platform = request.query_params.get("platform") or None
        if not provider and not platform:
            return HttpResponse(services.library_json(), content_type="application/json")
        return Response(services.list_library(provider=provider, platform=platform))


class LibraryScanView(ConsoleMgmtAPIView):
    """Rescan every store now (it also happens on start and when store files change)."""

    @extend_schema(request=None, responses={202: s.ScanQueuedSerializer})
    def post(self, request):
        requested_at = services.request_rescan()
        try:
            tasks.rescan_all.delay()
        except Exception:  # no broker reachable: do the (sub-second) scan here
            services.rescan_all()
        return Response({"queued": True, "requested_at": requested_at}, status=202)


class ArtView(ConsoleMgmtAPIView):
    @extend_schema(
        responses={(200, "image/jpeg"): OpenApiTypes.BINARY, 404: OpenApiResponse()},
        description="kind: portrait, hero, logo or header; only steam:<appid> ids are backed",
    )
    def get(self, request, entry_id: str, kind: str):
        try:
            data = art.get_jpeg(entry_id, kind)
        except art.NoArt:
            raise ApiError(404, "no art of that kind for that id") from None
        response = HttpResponse(data, content_type="image/jpeg")
        response["Cache-Control"] = "private, max-age=86400"
        return response


class CustomListView(ConsoleMgmtAPIView):
    @extend_schema(request=s.CustomInputSerializer, responses={201: s.CustomEntrySerializer})
    def post(self, request):
        data = _valid(s.CustomInputSerializer, request.data)
        return Response(services.create_custom(data), status=201)


class CustomDetailView(ConsoleMgmtAPIView):
    @extend_schema(responses=s.CustomEntrySerializer)
    def get(self, request, entry_id: str):
        return Response(services.get_custom(entry_id))

    @extend_schema(request=s.CustomInputSerializer, responses=s.CustomEntrySerializer)
    def put(self, request, entry_id: str):
        services.get_custom(entry_id)  # 404/409 before a body error, as for GET
        data = _valid(s.CustomInputSerializer, request.data)
        return Response(services.update_custom(entry_id, data))

    @extend_schema(responses={204: None})
    def delete(self, request, entry_id: str):
        services.delete_custom(entry_id)
        return Response(status=204)


_BAD_PROVIDER = {400: error("provider id is not 1-64 of [a-z0-9._-], or is `manual`")}


class ProviderView(ConsoleMgmtAPIView):
    @extend_schema(
        request=s.ProviderEntryInputSerializer(many=True),
        responses={200: s.CustomEntrySerializer(many=True), **_BAD_PROVIDER},
        description="Replace the provider's whole set in one transaction (payload order).",
    )
    def put(self, request, provider: str):
        services.check_provider(provider)
        if not isinstance(request.data, list):
            raise ApiError(400, "request body must be a JSON array of entries")
        items = _valid(s.ProviderEntryInputSerializer, request.data, many=True)
        return Response(services.reconcile(provider, list(items)))

    @extend_schema(responses={200: s.ProviderRemovedSerializer, **_BAD_PROVIDER})
    def delete(self, request, provider: str):
        return Response({"removed": services.remove_provider(provider)})


class ScannersView(ConsoleMgmtAPIView):
    @extend_schema(responses=s.ScannerSerializer(many=True))
    def get(self, request):
        return Response(services.list_scanners())


class ScannerView(ConsoleMgmtAPIView):
    @extend_schema(request=s.ScannerToggleSerializer, responses=s.ScannerSerializer(many=True))
    def put(self, request, scanner: str):
        data = _valid(s.ScannerToggleSerializer, request.data)
        return Response(services.set_scanner(scanner, data["enabled"]))
