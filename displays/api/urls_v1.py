"""Management API routes of the `displays` app (mounted at /api/v1/)."""

from django.urls import path

from displays.api import views

urlpatterns = [
    path("capture/methods", views.CaptureMethodsView.as_view(), name="v1-capture-methods"),
    path("compositors", views.CompositorsView.as_view(), name="v1-compositors"),
    path("compositors/headless", views.HeadlessCompositorsView.as_view(), name="v1-headless"),
    path("display/monitors", views.MonitorsView.as_view(), name="v1-display-monitors"),
    path("display/settings", views.DisplaySettingsView.as_view(), name="v1-display-settings"),
    path("display/layout", views.DisplayLayoutView.as_view(), name="v1-display-layout"),
    path("display/presets", views.PresetsView.as_view(), name="v1-display-presets"),
    path("display/presets/<str:preset_id>", views.PresetView.as_view(), name="v1-display-preset"),
    path("display/pin", views.DisplayPinView.as_view(), name="v1-display-pin"),
    path("display/unpin", views.DisplayUnpinView.as_view(), name="v1-display-unpin"),
    path("display/release", views.DisplayReleaseView.as_view(), name="v1-display-release"),
    path("display/state", views.DisplayStateView.as_view(), name="v1-display-state"),
]
