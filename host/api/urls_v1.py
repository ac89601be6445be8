"""Management API routes of the host itself: health, identity, configuration, restart and
shutdown (mounted at /api/v1/)."""

from django.urls import path

from host.api import host_views, views

urlpatterns = [
    path("health", views.V1HealthView.as_view(), name="v1-health"),
    path("host", views.V1HostView.as_view(), name="v1-host"),
    path("host/config", host_views.HostConfigView.as_view(), name="v1-host-config"),
    path("host/compat", host_views.HostCompatView.as_view(), name="v1-host-compat"),
    path("host/restart", host_views.HostRestartView.as_view(), name="v1-host-restart"),
    path("host/shutdown", host_views.HostShutdownView.as_view(), name="v1-host-shutdown"),
]
