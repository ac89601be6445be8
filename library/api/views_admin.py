"""Admin API routes of the library: the app catalog, covers, games scan and browse."""

from __future__ import annotations

from django.http import HttpResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiExample, OpenApiParameter, extend_schema
from rest_framework.response import Response

from apikit.base import AdminAPIView, json_object
from apikit.errors import ApiError
from apikit.schema import error
from hostconfig.schema import app_exec_fields
from library import app_input, browse, catalog, covers
from library.api import serializers as s

_BROKEN = {500: error("apps.json is not valid; fix the file by hand (never overwritten)")}


def _ok(**extra) -> Response:
    return Response({"status": True, "status_code": 200, **extra})


def _broken(exc: catalog.CatalogBroken) -> ApiError:
    return ApiError(500, f"{exc}; fix the file by hand (the host will not overwrite it)")


class AppsView(AdminAPIView):
    """The catalog. An entry that carries commands (cmd, detached, prep-cmd) or chooses a
    directory, file or environment for them also needs `config:exec` (403 naming the fields)."""

    scopes = {"GET": "apps:get", "POST": "config:set"}

    def exec_fields(self, request) -> dict[str, str]:
        body = request.data if request.method == "POST" else None
        return app_exec_fields(body) if isinstance(body, dict) else {}

    @extend_schema(responses={200: s.APPS_DOCUMENT, **_BROKEN}, description="The whole apps.json")
    def get(self, request):
        try:
            return Response(catalog.api_document())
        except catalog.CatalogBroken as exc:
            raise _broken(exc) from None

    @extend_schema(
        request=s.AppEntrySerializer,
        responses={200: s.SavedAppSerializer, **_BROKEN},
        examples=[OpenApiExample("new app", value={"index": -1, "name": "Steam Big Picture"})],
    )
    def post(self, request):
        try:
            index, app = app_input.clean(json_object(request))
            return _ok(index=catalog.save_app(index, app))
        except app_input.AppInputError as exc:
            raise ApiError(400, str(exc)) from None
        except IndexError as exc:
            raise ApiError(400, str(exc)) from None
        except catalog.CatalogBroken as exc:
            raise _broken(exc) from None


class AppDeleteView(AdminAPIView):
    scopes = {"DELETE": "config:set"}

    @extend_schema(
        responses={
            200: s.DeletedAppSerializer,
            400: error("no app at that index"),
            **_BROKEN,
        }
    )
    def delete(self, request, index: str):
        try:
            catalog.delete_app(int(index))
        except IndexError as exc:
            raise ApiError(400, str(exc)) from None
        except catalog.CatalogBroken as exc:
            raise _broken(exc) from None
        return _ok(result=f"application {int(index)} deleted")


class CoverView(AdminAPIView):
    scopes = {"GET": "apps:get"}

    @extend_schema(
        responses={
            (200, "image/png"): OpenApiTypes.BINARY,
            404: error("Cover image not found"),
            **_BROKEN,
        }
    )
    def get(self, request, index: str):
        try:
            data = covers.cover_for_index(int(index))
        except catalog.CatalogBroken as exc:
            raise _broken(exc) from None
        if data is None:
            raise ApiError(404, "Cover image not found")
        return HttpResponse(data, content_type="image/png")


class CoverUploadView(AdminAPIView):
    scopes = {"POST": "config:set"}

    @extend_schema(request=s.CoverUploadSerializer, responses=s.CoverSavedSerializer)
    def post(self, request):
        body = json_object(request)
        try:
            path = covers.upload(body.get("key"), url=body.get("url"), data=body.get("data"))
        except covers.CoverError as exc:
            raise ApiError(400, str(exc)) from None
        return _ok(path=str(path))


class GamesScanView(AdminAPIView):
    scopes = {"GET": "apps:get"}

    @extend_schema(responses=s.ScanResultSerializer(many=True))
    def get(self, request):
        return Response(browse.games_scan())


class BrowseView(AdminAPIView):
    scopes = {"GET": "config:get"}

    @extend_schema(
        parameters=[
            OpenApiParameter("path", str, description="absolute; empty lists /"),
            OpenApiParameter("type", str, enum=list(browse.TYPES)),
        ],
        responses={200: s.BrowseSerializer, 400: error("not an absolute path, or bad `type`")},
    )
    def get(self, request):
        try:
            result = browse.browse(
                request.query_params.get("path", ""), request.query_params.get("type", "any")
            )
        except browse.BrowseError as exc:
            raise ApiError(400, str(exc)) from None
        return Response(result)
