"""Management API routes of the console: logs, the runtime snapshot, update status (mounted at
/api/v1/)."""

from django.urls import path

from console.api import views

urlpatterns = [
    path("logs", views.V1LogsView.as_view(), name="v1-logs"),
    path("status", views.V1StatusView.as_view(), name="v1-status"),
    path("update/status", views.V1UpdateStatusView.as_view(), name="v1-update-status"),
    path("update/check", views.V1UpdateCheckView.as_view(), name="v1-update-check"),
    path("update/apply", views.V1UpdateApplyView.as_view(), name="v1-update-apply"),
]
