"""Player page routes (included from hostmgmt/urls.py)."""

from django.urls import path

from streaming.native import views

urlpatterns = [
    path("play", views.play, name="native-play"),
    path("native/offer", views.offer, name="native-offer"),
]
