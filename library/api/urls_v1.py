"""Management API routes of the `library` app (mounted at /api/v1/)."""

from django.urls import path

from library.api import views_v1 as v

urlpatterns = [
    path("library", v.LibraryView.as_view(), name="library"),
    path("library/scan", v.LibraryScanView.as_view(), name="library-scan"),
    path("library/art/<str:entry_id>/<str:kind>", v.ArtView.as_view(), name="library-art"),
    path("library/custom", v.CustomListView.as_view(), name="library-custom"),
    path("library/custom/<str:entry_id>", v.CustomDetailView.as_view(), name="library-custom-one"),
    path("library/provider/<str:provider>", v.ProviderView.as_view(), name="library-provider"),
    path("library/scanners", v.ScannersView.as_view(), name="library-scanners"),
    path("library/scanners/<str:scanner>", v.ScannerView.as_view(), name="library-scanner"),
]
