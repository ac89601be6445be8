"""Platform routes of the management API; mounted at /api/v1/ with each app's own v1 routes."""

from django.urls import path

from hostmgmt.api import views

urlpatterns = [
    path("health", views.V1HealthView.as_view(), name="v1-health"),
    path("host", views.V1HostView.as_view(), name="v1-host"),
]
