"""Web pages of the pairing app, mounted at the site root."""

from django.urls import path

from pairing import pages

urlpatterns = [
    path("pin", pages.pin_page, name="pin"),
]
