"""Platform routes of the admin API; mounted at /api/ with each app's own admin routes."""

from django.urls import path

from hostmgmt.api import console_views, host_views, stream_views, views

urlpatterns = [
    path("health", views.AdminHealthView.as_view(), name="admin-health"),
    path("config", host_views.AdminConfigView.as_view(), name="admin-config"),
    path("configLocale", views.ConfigLocaleView.as_view(), name="admin-config-locale"),
    path("csrf-token", views.CsrfTokenView.as_view(), name="admin-csrf-token"),
    path("password", views.PasswordView.as_view(), name="admin-password"),
    path("tokens", console_views.TokensView.as_view(), name="admin-tokens"),
    path("tokens/<str:name>", console_views.TokenDetailView.as_view(), name="admin-token"),
    path("logs", console_views.AdminLogsView.as_view(), name="admin-logs"),
    path("update", console_views.AdminUpdateView.as_view(), name="admin-update"),
    path("restart", console_views.RestartView.as_view(), name="admin-restart"),
    path("vigembus/status", console_views.VigemStatusView.as_view(), name="admin-vigem-status"),
    path("vigembus/install", console_views.VigemInstallView.as_view(), name="admin-vigem-install"),
    path(
        "reset-display-device-persistence",
        console_views.ResetDisplayPersistenceView.as_view(),
        name="admin-reset-display",
    ),
    path("stream/telemetry", stream_views.TelemetryView.as_view(), name="admin-telemetry"),
    path("stream/latency", stream_views.LatencyView.as_view(), name="admin-latency"),
    path("stream/network-stats", stream_views.NetworkStatsView.as_view(), name="admin-netstats"),
    path("sessions", stream_views.SessionsView.as_view(), name="admin-sessions"),
    path("sessions/<int:record_id>", stream_views.SessionDetailView.as_view(), name="admin-sess"),
]
