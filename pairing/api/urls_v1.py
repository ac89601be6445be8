"""Management API routes of the `pairing` app (mounted at /api/v1/)."""

from django.urls import path

from pairing.api import native_views as native
from pairing.api import views

urlpatterns: list = [
    path("clients", views.ClientsView.as_view()),
    path("clients/<str:fingerprint>", views.ClientView.as_view()),
    path("native/pending", native.PendingListView.as_view()),
    path("native/pending/<int:pending_id>/approve", native.PendingApproveView.as_view()),
    path("native/pending/<int:pending_id>/deny", native.PendingDenyView.as_view()),
    path("native/pair", native.PairView.as_view()),
    path("native/pair/arm", native.PairArmView.as_view()),
    path("native/clients", native.NativeClientsView.as_view()),
    path("native/clients/<str:fingerprint>", native.NativeClientView.as_view()),
]
