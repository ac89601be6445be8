"""Admin API routes of the `streaming` app (mounted at /api/)."""

from django.urls import path

from streaming.api import history_views, session_views

urlpatterns = [
    path("apps/close", session_views.AppsCloseView.as_view(), name="admin-apps-close"),
    path("stream/latency", history_views.LatencyView.as_view(), name="admin-latency"),
    path("stream/network-stats", history_views.NetworkStatsView.as_view(), name="admin-netstats"),
    path("sessions", history_views.SessionsView.as_view(), name="admin-sessions"),
    path("sessions/<int:record_id>", history_views.SessionDetailView.as_view(), name="admin-sess"),
]
