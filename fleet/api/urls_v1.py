"""Management API routes of the `fleet` app (mounted at /api/v1/)."""

from django.urls import path

from fleet.api import views

urlpatterns: list = [
    path("fleet/tickets", views.TicketsView.as_view(), name="v1-fleet-tickets"),
    path(
        "fleet/members/<int:member_id>/sessions",
        views.MemberSessionsView.as_view(),
        name="v1-fleet-member-sessions",
    ),
    path(
        "fleet/members/<int:member_id>/sessions/<str:session_id>",
        views.MemberSessionView.as_view(),
        name="v1-fleet-member-session",
    ),
]
