"""Platform routes of the management API; mounted at /api/v1/ with each app's own v1 routes."""

from django.urls import path

from hostmgmt.api import console_views, host_views, views

urlpatterns = [
    path("health", views.V1HealthView.as_view(), name="v1-health"),
    path("host", views.V1HostView.as_view(), name="v1-host"),
    path("host/config", host_views.HostConfigView.as_view(), name="v1-host-config"),
    path("host/compat", host_views.HostCompatView.as_view(), name="v1-host-compat"),
    path("host/restart", host_views.HostRestartView.as_view(), name="v1-host-restart"),
    path("host/shutdown", host_views.HostShutdownView.as_view(), name="v1-host-shutdown"),
    path("logs", console_views.V1LogsView.as_view(), name="v1-logs"),
    path("status", console_views.V1StatusView.as_view(), name="v1-status"),
    path("update/status", console_views.V1UpdateStatusView.as_view(), name="v1-update-status"),
    path("update/check", console_views.V1UpdateCheckView.as_view(), name="v1-update-check"),
]
