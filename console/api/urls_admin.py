"""Admin API routes of the console: scoped tokens, logs, updater, restart, host telemetry and
the Windows-only routes' Linux answers (mounted at /api/)."""

from django.urls import path

from console.api import views

urlpatterns = [
    path("tokens", views.TokensView.as_view(), name="admin-tokens"),
    path("tokens/<str:name>", views.TokenDetailView.as_view(), name="admin-token"),
    path("logs", views.AdminLogsView.as_view(), name="admin-logs"),
    path("update", views.AdminUpdateView.as_view(), name="admin-update"),
    path("restart", views.RestartView.as_view(), name="admin-restart"),
    path("vigembus/status", views.VigemStatusView.as_view(), name="admin-vigem-status"),
    path("vigembus/install", views.VigemInstallView.as_view(), name="admin-vigem-install"),
    path(
        "reset-display-device-persistence",
        views.ResetDisplayPersistenceView.as_view(),
        name="admin-reset-display",
    ),
    path("stream/telemetry", views.TelemetryView.as_view(), name="admin-telemetry"),
]
