"""Management routes of the game lifecycle: session ⇄ game settings and ending waiting games.

Thin: validation and storage live in `games.session_settings`, the closing in
`games.lifecycle`, so the engine and these routes share one path.
"""

from __future__ import annotations

from drf_spectacular.utils import extend_schema, inline_serializer
from rest_framework import serializers
from rest_framework.response import Response

from apikit.base import MgmtAPIView, json_object
from apikit.errors import ApiError, FieldErrors
from apikit.schema import error
from games import lifecycle
from games import session_settings as game_settings


class SessionSettingsSerializer(serializers.Serializer):
    version = serializers.IntegerField(default=1, help_text="1")
    game_on_session_end = serializers.ChoiceField(
        choices=list(game_settings.GAME_ON_SESSION_END), default=game_settings.KEEP
    )
    session_on_game_exit = serializers.BooleanField(default=True)
    disconnect_grace_seconds = serializers.IntegerField(
        default=300, min_value=game_settings.GRACE_MIN, max_value=game_settings.GRACE_MAX
    )


_State = inline_serializer(
    "SessionSettingsState",
    {
        "settings": SessionSettingsSerializer(),
        "configured": serializers.BooleanField(),
        "enforced": serializers.ListField(child=serializers.CharField()),
    },
)


class SessionSettingsView(MgmtAPIView):
    """GET/PUT /session/settings: read at each session end, so live sessions pick it up."""

    @extend_schema(responses=_State)
    def get(self, request):
        return Response(game_settings.state())

    @extend_schema(
        request=SessionSettingsSerializer,
        responses={200: _State, 500: error("the settings file could not be written")},
    )
    def put(self, request):
        new = game_settings.validate(request.data)  # SettingsError: 400 naming every field
        try:
            game_settings.save(new)
        except OSError as exc:
            raise ApiError(500, f"session settings not persisted: {exc.strerror or exc}") from None
        return Response(game_settings.state())


class GameEndView(MgmtAPIView):
    """POST /game/end: end one app's (or every) game waiting out its session's grace."""

    @extend_schema(
        request=inline_serializer(
            "GameEndRequest",
            {"app_id": serializers.CharField(required=False, help_text="omitted: every app")},
        ),
        responses={
            200: inline_serializer("GameEnded", {"ended": serializers.IntegerField()}),
            409: error("no game (of that app) is waiting to be ended"),
        },
    )
    def post(self, request):
        body = json_object(request)
        app_id = body.get("app_id")
        if app_id is not None and (not isinstance(app_id, str) or not app_id.strip()):
            raise FieldErrors("invalid end-game request", {"app_id": "must be a non-empty string"})
        ended = lifecycle.end_waiting_games(app_id)
        if ended == 0:
            what = f"for app {app_id!r} " if app_id else ""
            raise ApiError(409, f"no game {what}is waiting to be ended")
        return Response({"ended": ended})
