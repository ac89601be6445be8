"""The player page and its signalling endpoint (included from hostmgmt/urls.py)."""

from django.urls import path

from native.api import views

urlpatterns = [
    path("play", views.play, name="native-play"),
    path("native/offer", views.OfferView.as_view(), name="native-offer"),
]
