"""Player page routes and the console's native-pairing relay (included from hostmgmt/urls.py)."""

from django.urls import path

from streaming.native import console, views

urlpatterns = [
    path("play", views.play, name="native-play"),
    path("native/offer", views.offer, name="native-offer"),
    path("console/native/pending", console.pending, name="console-native-pending"),
    path("console/native/pending/<int:pending_id>/approve", console.approve),
    path("console/native/pending/<int:pending_id>/deny", console.deny),
    path("console/native/pair", console.pair, name="console-native-pair"),
    path("console/native/pair/arm", console.arm),
]
