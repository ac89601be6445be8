"""Admin API routes of the host itself: health, configuration, locale, CSRF token, password
(mounted at /api/)."""

from django.urls import path

from host.api import host_views, views

urlpatterns = [
    path("health", views.AdminHealthView.as_view(), name="admin-health"),
    path("config", host_views.AdminConfigView.as_view(), name="admin-config"),
    path("configLocale", views.ConfigLocaleView.as_view(), name="admin-config-locale"),
    path("csrf-token", views.CsrfTokenView.as_view(), name="admin-csrf-token"),
    path("password", views.PasswordView.as_view(), name="admin-password"),
]
