"""Management API routes of the `hooks` app (mounted at /api/v1/)."""

from django.urls import path

from hooks import sse
from hooks.api import views

urlpatterns = [
    path("events", sse.events_view, name="v1-events"),
    path("hooks", views.HooksView.as_view(), name="v1-hooks"),
    path("hooks/test", views.HookTestView.as_view(), name="v1-hooks-test"),
    path("hooks/deliveries", views.DeliveriesView.as_view(), name="v1-hooks-deliveries"),
]
