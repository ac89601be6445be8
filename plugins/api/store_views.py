"""Management API views of the plugin store (`/api/v1/store/...` but `/store/runtime`, which
is the runner's). Thin: `plugins.store.services` does the work. The console's Store page calls
them with the operator's login session; the plugin token gets 403 on every one
(`access/mgmt.py` PLUGIN_DENIED)."""

from __future__ import annotations

from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import serializers
from rest_framework.response import Response

from apikit.base import ConsoleMgmtAPIView, json_object
from plugins.store import services


class HostFactsSerializer(serializers.Serializer):
    version = serializers.CharField()
    platform = serializers.CharField()


class SourceViewSerializer(serializers.Serializer):
    name = serializers.CharField()
    url = serializers.CharField()
    builtin = serializers.BooleanField()
    signed = serializers.BooleanField()
    stale = serializers.BooleanField()
    fetched_at = serializers.IntegerField(
        allow_null=True, help_text="unix s of the last good fetch"
    )
    error = serializers.CharField(allow_null=True)
    entry_count = serializers.IntegerField()
    public_key = serializers.CharField(allow_null=True, help_text="ed25519:<base64>")


class CatalogEntrySerializer(serializers.Serializer):
    id = serializers.CharField(help_text="the plugin id (its entry point name)")
    pkg = serializers.CharField(help_text="host-plugin-*")
    title = serializers.CharField()
    description = serializers.CharField(allow_blank=True)
    author = serializers.CharField(allow_blank=True)
    version = serializers.CharField(help_text="the pinned installable version")
    source = serializers.CharField()
    tier = serializers.ChoiceField(choices=["verified", "external", "unverified"])
    signed = serializers.BooleanField()
    platforms = serializers.ListField(child=serializers.CharField())
    compatible = serializers.BooleanField()
    update_available = serializers.BooleanField()
    icon = serializers.CharField(required=False)
    homepage = serializers.CharField(required=False)
    license = serializers.CharField(required=False)
    reviewed_at = serializers.CharField(required=False)
    min_host = serializers.CharField(required=False)
    incompatible_reason = serializers.CharField(required=False)
    installed_version = serializers.CharField(required=False)
    blocked = serializers.CharField(required=False)


class CatalogResponseSerializer(serializers.Serializer):
    host = HostFactsSerializer()
    sources = SourceViewSerializer(many=True)
    plugins = CatalogEntrySerializer(many=True)
    busy = serializers.BooleanField(help_text="a package job runs")


class SourceInputSerializer(serializers.Serializer):
    url = serializers.CharField(help_text="https only, at most 500 characters")
    public_key = serializers.CharField(
        required=False, allow_blank=True, help_text="ed25519:<base64 of 32 bytes>; blank = unsigned"
    )


class InstalledViewSerializer(serializers.Serializer):
    pkg = serializers.CharField()
    tier = serializers.ChoiceField(choices=["verified", "external", "unverified", "cli"])
    running = serializers.BooleanField()
    version = serializers.CharField(required=False)
    source = serializers.CharField(required=False)
    entry_id = serializers.CharField(required=False)
    plugin_id = serializers.CharField(required=False)
    title = serializers.CharField(required=False)
    installed_at = serializers.CharField(required=False)
    update_available = serializers.CharField(required=False)
    blocked = serializers.CharField(required=False)
    conflict = serializers.CharField(
        required=False,
        help_text="another distribution declares the same plugin id: none of them runs",
    )


class InstallRequestSerializer(serializers.Serializer):
    source = serializers.CharField(required=False)
    id = serializers.CharField(required=False)
    spec = serializers.CharField(
        required=False, help_text="https://.../<name>-<version>-py3-none-any.whl#sha256=<hex>"
    )
    accept_unverified = serializers.BooleanField(required=False, default=False)


class UninstallRequestSerializer(serializers.Serializer):
    pkg = serializers.CharField(help_text="an installed host-plugin-* package")


class JobRefSerializer(serializers.Serializer):
    job = serializers.CharField(help_text="job-<unix>-<counter>")


class JobSerializer(serializers.Serializer):
    id = serializers.CharField()
    kind = serializers.ChoiceField(choices=["install", "uninstall"])
    target = serializers.CharField()
    state = serializers.ChoiceField(choices=["running", "done", "failed"])
    phase = serializers.CharField()
    log = serializers.ListField(child=serializers.CharField(), help_text="last 200 lines")
    error = serializers.CharField(allow_null=True)
    started_at = serializers.IntegerField()
    finished_at = serializers.IntegerField(allow_null=True)


_BAD = OpenApiResponse(description="unknown source or entry, a bad spec, a missing "
                       "accept_unverified, an incompatible or blocked entry")  # fmt: skip
_BUSY = OpenApiResponse(description="another package job is running (one at a time)")
_NO_QUEUE = OpenApiResponse(description="Redis or the task queue is out of reach")


class StoreCatalogView(ConsoleMgmtAPIView):
    @extend_schema(responses=CatalogResponseSerializer, summary="The merged plugin catalog",
                   description="Catalogs older than 6 h are refetched first.")  # fmt: skip
    def get(self, request):
        return Response(services.catalog_response())


class StoreRefreshView(ConsoleMgmtAPIView):
    @extend_schema(request=None, responses=CatalogResponseSerializer,
                   summary="Refetch every catalog now (emits store.changed)")  # fmt: skip
    def post(self, request):
        return Response(services.refresh())


class StoreInstalledView(ConsoleMgmtAPIView):
    @extend_schema(responses=InstalledViewSerializer(many=True), summary="Installed plugins")
    def get(self, request):
        return Response(services.installed_view())


class StoreInstallView(ConsoleMgmtAPIView):
    needs_redis = True

    @extend_schema(request=InstallRequestSerializer,
                   responses={202: JobRefSerializer, 400: _BAD, 409: _BUSY, 503: _NO_QUEUE},
                   summary="Install a plugin (a job)")  # fmt: skip
    def post(self, request):
        return Response(services.start_install(json_object(request)), status=202)


class StoreUninstallView(ConsoleMgmtAPIView):
    needs_redis = True

    @extend_schema(request=UninstallRequestSerializer,
                   responses={202: JobRefSerializer, 400: OpenApiResponse(
                       description="not an installed plugin package"), 409: _BUSY,
                       503: _NO_QUEUE},
                   summary="Uninstall a plugin (a job)")  # fmt: skip
    def post(self, request):
        return Response(services.start_uninstall(json_object(request)), status=202)


class StoreJobsView(ConsoleMgmtAPIView):
    @extend_schema(responses=JobSerializer(many=True), summary="Recent package jobs, oldest first")
    def get(self, request):
        return Response(services.list_jobs())


class StoreJobView(ConsoleMgmtAPIView):
    @extend_schema(responses={200: JobSerializer, 404: OpenApiResponse(description="no such job")},
                   summary="One package job")  # fmt: skip
    def get(self, request, job_id):
        return Response(services.get_job(job_id))


class StoreSourcesView(ConsoleMgmtAPIView):
    @extend_schema(responses=SourceViewSerializer(many=True),
                   summary="Catalog sources, the built-in one first")  # fmt: skip
    def get(self, request):
        return Response(services.list_sources())


class StoreSourceView(ConsoleMgmtAPIView):
    @extend_schema(request=SourceInputSerializer,
                   responses={204: None, 400: OpenApiResponse(
                       description="invalid name, url or key, the reserved built-in name, or "
                       "32 sources already")},
                   summary="Add or replace a catalog source (emits store.changed)")  # fmt: skip
    def put(self, request, name):
        services.put_source(name, json_object(request))
        return Response(status=204)

    @extend_schema(responses={204: None, 403: OpenApiResponse(
                       description="the built-in source cannot be removed")},
                   summary="Remove a catalog source (204 when already absent)")  # fmt: skip
    def delete(self, request, name):
        services.delete_source(name)
        return Response(status=204)
