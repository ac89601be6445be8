"""Platform routes of the admin API; mounted at /api/ with each app's own admin routes."""

from django.urls import path

from hostmgmt.api import views

urlpatterns = [
    path("health", views.AdminHealthView.as_view(), name="admin-health"),
    path("configLocale", views.ConfigLocaleView.as_view(), name="admin-config-locale"),
    path("csrf-token", views.CsrfTokenView.as_view(), name="admin-csrf-token"),
    path("password", views.PasswordView.as_view(), name="admin-password"),
]
