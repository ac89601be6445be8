"""The live sessions for the console's "Now streaming" page and API users: list with the
per-second figures, stop one, a thumbnail of one's screen."""

from __future__ import annotations

import logging

from django.http import HttpResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema, inline_serializer
from rest_framework import serializers
from rest_framework.response import Response

from apikit.base import ConsoleMgmtAPIView
from apikit.errors import ApiError
from apikit.schema import error
from streaming import live, thumbnail

log = logging.getLogger(__name__)


def _figure(**kw):
    return serializers.FloatField(allow_null=True, **kw)


_Point = inline_serializer(
    "LiveStreamPoint",
    {
        "ts_ms": serializers.IntegerField(allow_null=True),
        "fps": _figure(help_text="frames the host encoded in that second"),
        "bitrate_kbps": _figure(),
        "target_kbps": _figure(),
        "loss_pct": _figure(help_text="null when the plane does not measure it"),
        "rtt_ms": _figure(),
        "encode_ms": _figure(),
        "capture_ms": _figure(),
    },
    allow_null=True,
)
_Streams = inline_serializer(
    "LiveStreams",
    {
        "sessions": inline_serializer(
            "LiveStream",
            {
                "id": serializers.CharField(),
                "plane": serializers.ChoiceField(["compat", "native"]),
                "state": serializers.CharField(),
                "client": serializers.CharField(),
                "client_id": serializers.CharField(),
                "app": serializers.CharField(),
                "app_title": serializers.CharField(),
                "mode": serializers.CharField(),
                "width": serializers.IntegerField(),
                "height": serializers.IntegerField(),
                "fps": serializers.IntegerField(help_text="the rate the client asked for"),
                "codec": serializers.CharField(),
                "encoder": serializers.CharField(),
                "encoder_options": serializers.DictField(
                    child=serializers.CharField(),
                    help_text="the FFmpeg options the open encoder was given (preset, qp, ...)",
                ),
                "t_start": serializers.FloatField(allow_null=True),
                "live": serializers.ListField(child=_Point),
                "now": _Point,
            },
            many=True,
        )
    },
)


class StreamsView(ConsoleMgmtAPIView):
    needs_redis = True  # the session registry: Redis down is 503 with Retry-After

    @extend_schema(
        responses={200: _Streams},
        summary="The live sessions with their last minute of figures",
        description="`{sessions[{id, plane, state, client, client_id, app, app_title, mode, "
        "width, height, fps, codec, encoder, t_start, live[{ts_ms, fps, bitrate_kbps, "
        "target_kbps, loss_pct, rtt_ms, encode_ms, capture_ms}], now}]}`, oldest first; "
        "`live` holds one point a second (60 at most), `now` the newest or null; a figure "
        "the plane does not measure is null. 503 when the "
        "session registry (Redis) is unreachable.",
    )
    def get(self, request):
        return Response({"sessions": live.streams()})


class StreamView(ConsoleMgmtAPIView):
    needs_redis = True

    @extend_schema(
        request=None,
        responses={204: None},
        summary="End one live session",
        description="A deliberate stop of this session only (its display skips the linger "
        "unless pinned or kept forever); waits up to 8 s for it to end. 404 no live session "
        "with that id; 503 as for the list.",
    )
    def delete(self, request, session_id: str):
        if not live.stop(session_id):
            raise ApiError(404, "no live session with that id")
        return Response(status=204)


class StreamThumbnailView(ConsoleMgmtAPIView):
    needs_redis = True  # the registry and the one-a-second throttle live there

    @extend_schema(
        responses={
            (200, "image/jpeg"): OpenApiTypes.BINARY,
            404: error("No live session with that id"),
            409: error("No picture can be taken of this session's display now"),
        },
        summary="A small picture of one live session's screen",
        description="A JPEG at most 320 px wide of what the session's display shows, taken "
        "by the host with the session's capture backend (X displays and wlroots outputs; a "
        "GNOME, KWin or portal display is 409). At most one capture per session per second: "
        "requests within the second get the last picture. Never cached (`no-store`). 404 "
        "no live session with that id; 409 with the reason when no picture can be taken; "
        "503 as for the list. Not for the plugin token (it shows the screen).",
    )
    def get(self, request, session_id: str):
        try:
            data = thumbnail.get(session_id)
        except thumbnail.NoThumbnail as exc:
            raise ApiError(exc.status, exc.message) from None
        return HttpResponse(data, content_type="image/jpeg")
