"""Management API routes of the `pairing` app (mounted at /api/v1/)."""

from django.urls import include, path

from pairing.api import views

urlpatterns: list = [
    path("clients", views.ClientsView.as_view()),
    path("clients/<str:fingerprint>", views.ClientView.as_view()),
    path("native/", include("streaming.native.urls_v1")),
]
