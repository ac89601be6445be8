"""Admin API routes of the `library` app (mounted at /api/)."""

from django.urls import path, re_path

from library.api import views_admin as v

urlpatterns = [
    path("apps", v.AppsView.as_view(), name="admin-apps"),
    re_path(r"^apps/(?P<index>[0-9]{1,9})$", v.AppDeleteView.as_view(), name="admin-app-delete"),
    path("covers/upload", v.CoverUploadView.as_view(), name="admin-cover-upload"),
    re_path(r"^covers/(?P<index>[0-9]{1,9})$", v.CoverView.as_view(), name="admin-cover"),
    path("games/scan", v.GamesScanView.as_view(), name="admin-games-scan"),
    path("browse", v.BrowseView.as_view(), name="admin-browse"),
]
