"""Management routes of the game lifecycle: session ⇄ game settings and ending waiting games.

Thin: validation and storage live in `games.settings`, the closing in
`games.lifecycle`, so the engine and these routes share one path.
"""

from __future__ import annotations

from rest_framework.response import Response

from games import lifecycle
from games import settings as game_settings
from hostmgmt.api.base import MgmtAPIView, json_object
from hostmgmt.api.errors import ApiError, FieldErrors


class SessionSettingsView(MgmtAPIView):
    """GET/PUT /session/settings: read at each session end, so live sessions pick it up."""

    def get(self, request):
        return Response(game_settings.state())

    def put(self, request):
        new = game_settings.validate(request.data)  # SettingsError: 400 naming every field
        try:
            game_settings.save(new)
        except OSError as exc:
            raise ApiError(500, f"session settings not persisted: {exc.strerror or exc}") from None
        return Response(game_settings.state())


class GameEndView(MgmtAPIView):
    """POST /game/end: end one app's (or every) game waiting out its session's grace."""

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
