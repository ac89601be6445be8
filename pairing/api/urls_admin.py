"""Admin API routes of the `pairing` app (mounted at /api/)."""

from django.urls import path

from pairing.api import views

urlpatterns: list = [
    path("clients/list", views.AdminClientListView.as_view()),
    path("clients/unpair", views.AdminUnpairView.as_view()),
    path("clients/unpair-all", views.AdminUnpairAllView.as_view()),
    path("clients/update", views.AdminClientUpdateView.as_view()),
    path("pin", views.AdminPinView.as_view()),
]
