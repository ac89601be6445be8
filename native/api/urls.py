"""The player page and its signalling endpoint (included from hostmgmt/urls.py)."""

from django.urls import path

from native.api import views

urlpatterns = [
    path("play", views.play, name="native-play"),
    path("native/offer", views.OfferView.as_view(), name="native-offer"),
    path("play/place", views.PlaceView.as_view(), name="native-place"),
    path("play/fleet", views.fleet_handoff, name="native-fleet-handoff"),
]
