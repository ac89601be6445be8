"""Management API routes of the `streaming` app (mounted at /api/v1/)."""

from django.urls import path

from streaming.api import game_views, live_views, session_views, views

urlpatterns = [
    path("diagnostics/preflight", views.PreflightView.as_view(), name="v1-preflight"),
    path("gpus", views.GpusView.as_view(), name="v1-gpus"),
    path("gpus/preference", views.GpuPreferenceView.as_view(), name="v1-gpu-preference"),
    path("session", session_views.SessionView.as_view(), name="v1-session"),
    path("session/settings", game_views.SessionSettingsView.as_view(), name="v1-session-settings"),
    path("streams", live_views.StreamsView.as_view(), name="v1-streams"),
    path("streams/<str:session_id>", live_views.StreamView.as_view(), name="v1-stream"),
    path(
        "streams/<str:session_id>/thumbnail",
        live_views.StreamThumbnailView.as_view(),
        name="v1-stream-thumbnail",
    ),
    path("game/end", game_views.GameEndView.as_view(), name="v1-game-end"),
]
