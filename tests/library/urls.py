"""Only the library's routes, so in-process tests do not depend on other apps' work in progress."""

from django.urls import include, path

urlpatterns = [
    path("api/v1/", include("library.api.urls_v1")),
    path("api/", include("library.api.urls_admin")),
]
