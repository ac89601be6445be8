"""Management API routes of the `streaming` app (mounted at /api/v1/)."""

from django.urls import path

from streaming.api import game_views, session_views, views

urlpatterns = [
    path("capture/methods", views.CaptureMethodsView.as_view(), name="v1-capture-methods"),
    path("compositors", views.CompositorsView.as_view(), name="v1-compositors"),
    path("compositors/headless", views.HeadlessCompositorsView.as_view(), name="v1-headless"),
    path("diagnostics/preflight", views.PreflightView.as_view(), name="v1-preflight"),
    path("display/monitors", views.MonitorsView.as_view(), name="v1-display-monitors"),
    path("display/settings", views.DisplaySettingsView.as_view(), name="v1-display-settings"),
    path("display/layout", views.DisplayLayoutView.as_view(), name="v1-display-layout"),
    path("display/presets", views.PresetsView.as_view(), name="v1-display-presets"),
    path("display/presets/<str:preset_id>", views.PresetView.as_view(), name="v1-display-preset"),
    path("display/release", views.DisplayReleaseView.as_view(), name="v1-display-release"),
    path("display/state", views.DisplayStateView.as_view(), name="v1-display-state"),
    path("gpus", views.GpusView.as_view(), name="v1-gpus"),
    path("gpus/preference", views.GpuPreferenceView.as_view(), name="v1-gpu-preference"),
    path("session", session_views.SessionView.as_view(), name="v1-session"),
    path("session/settings", game_views.SessionSettingsView.as_view(), name="v1-session-settings"),
    path("game/end", game_views.GameEndView.as_view(), name="v1-game-end"),
]
