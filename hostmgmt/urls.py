"""URL map: the two APIs, their docs, the Django admin and the web pages."""

from django.contrib import admin
from django.urls import include, path
from drf_spectacular.views import SpectacularSwaggerView

from apikit import error_views
from apikit.schema import SchemaView
from console import pages

v1_patterns = [
    path("", include("host.api.urls_v1")),
    path("", include("console.api.urls_v1")),
    path("", include("hooks.api.urls_v1")),
    path("", include("library.api.urls_v1")),
    path("", include("pairing.api.urls_v1")),
    path("", include("streaming.api.urls_v1")),
    path("", include("displays.api.urls_v1")),
    path("", include("plugins.api.urls_v1")),
    path("", include("fleet.api.urls_v1")),
    path("", include("fleet.urls_events")),
]

admin_api_patterns = [
    path("", include("host.api.urls_admin")),
    path("", include("console.api.urls_admin")),
    path("", include("hooks.api.urls_admin")),
    path("", include("library.api.urls_admin")),
    path("", include("pairing.api.urls_admin")),
    path("", include("streaming.api.urls_admin")),
]

urlpatterns = [
    path("api/v1/", include(v1_patterns)),
    path("api/schema", SchemaView.as_view(), name="schema"),
    path("api/docs", SpectacularSwaggerView.as_view(url_name="schema"), name="api-docs"),
    path("api/", include(admin_api_patterns)),
    path("admin/login/", pages.admin_login, name="admin-login"),  # shares the login bucket
    path("admin/", admin.site.urls),
    path("welcome", pages.welcome, name="welcome"),
    path("", include("pairing.urls_pages")),
    path("", include("native.api.urls")),
    path("", include("plugins.urls_pages")),
    path("", include("console.urls")),
]

handler400 = error_views.bad_request
handler403 = error_views.forbidden
handler404 = error_views.not_found
handler500 = error_views.server_error
