"""Admin API routes of the `streaming` app (mounted at /api/)."""

from django.urls import path

from streaming.api import session_views

urlpatterns = [
    path("apps/close", session_views.AppsCloseView.as_view(), name="admin-apps-close"),
]
