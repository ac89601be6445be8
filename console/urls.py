"""Web console routes (pages, their two session-authenticated JSON relays, static files)."""

import posixpath

from django.contrib.staticfiles.views import serve
from django.http import Http404
from django.urls import path, re_path

from console import live_pages, views


def serve_static(request, path):
    """Static assets from the app finders; a path that leaves the static roots is a plain 404."""
    clean = posixpath.normpath(path).lstrip("/")
    if clean.startswith("..") or "\x00" in path or clean != path.lstrip("/"):
        raise Http404("no such file")
    return serve(request, clean, insecure=True)


urlpatterns = [
    path("login", views.login_view, name="console-login"),
    path("logout", views.logout_view, name="console-logout"),
    path("clients", views.clients, name="console-clients"),
    path("apps", views.apps, name="console-apps"),
    path("library", views.library, name="console-library"),
    path("hooks", views.hooks, name="console-hooks"),
    path("store", views.plugin_store, name="console-store"),
    path("config", views.config, name="console-config"),
    path("sessions", views.sessions, name="console-sessions"),
    path("tokens", views.tokens, name="console-tokens"),
    path("fleet", views.fleet, name="console-fleet"),
    path("logs", views.logs, name="console-logs"),
    path("streaming", live_pages.streaming, name="console-streaming"),
    path("displays", live_pages.displays, name="console-displays"),
    path("pair", live_pages.pair, name="console-pair"),
    path("console/status", views.status_json, name="console-status"),
    path("console/events", views.events_stream, name="console-events"),
    # daphne serves no static files: the console's, the Django admin's and the API docs' assets
    # come from the app finders here (small files, a single-operator appliance).
    re_path(r"^static/(?P<path>.*)$", serve_static),
    path("", views.dashboard, name="console-dashboard"),
]
