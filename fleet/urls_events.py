"""The fleet's event stream route (mounted at /api/v1/)."""

from django.urls import path

from fleet import stream

urlpatterns = [
    path("fleet/events", stream.fleet_events_view, name="v1-fleet-events"),
]
