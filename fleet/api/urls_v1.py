"""Management API routes of the `fleet` app (mounted at /api/v1/)."""

from django.urls import path

from fleet.api import views

urlpatterns = [
    path("fleet/whoami", views.WhoamiView.as_view(), name="v1-fleet-whoami"),
    path("fleet/identity", views.IdentityView.as_view(), name="v1-fleet-identity"),
    path("fleet/tokens", views.TokensView.as_view(), name="v1-fleet-tokens"),
    path("fleet/tokens/<str:name>", views.TokenView.as_view(), name="v1-fleet-token"),
    path("fleet/members", views.MembersView.as_view(), name="v1-fleet-members"),
    path("fleet/members/<int:member_id>", views.MemberView.as_view(), name="v1-fleet-member"),
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
