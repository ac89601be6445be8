"""`/api/v1/native/...` (included from pairing/api/urls_v1.py)."""

from django.urls import path

from streaming.native import api

urlpatterns = [
    path("pending", api.PendingListView.as_view()),
    path("pending/<int:pending_id>/approve", api.PendingApproveView.as_view()),
    path("pending/<int:pending_id>/deny", api.PendingDenyView.as_view()),
    path("pair", api.PairView.as_view()),
    path("pair/arm", api.PairArmView.as_view()),
    path("clients", api.NativeClientsView.as_view()),
    path("clients/<str:fingerprint>", api.NativeClientView.as_view()),
]
