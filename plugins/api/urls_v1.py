"""`/api/v1/plugins...` and `/api/v1/store...` routes."""

from django.urls import path

from plugins.api import store_views, views

urlpatterns: list = [
    path("store/catalog", store_views.StoreCatalogView.as_view(), name="v1-store-catalog"),
    path("store/refresh", store_views.StoreRefreshView.as_view(), name="v1-store-refresh"),
    path("store/installed", store_views.StoreInstalledView.as_view(), name="v1-store-installed"),
    path("store/install", store_views.StoreInstallView.as_view(), name="v1-store-install"),
    path("store/uninstall", store_views.StoreUninstallView.as_view(), name="v1-store-uninstall"),
    path("store/jobs", store_views.StoreJobsView.as_view(), name="v1-store-jobs"),
    path("store/jobs/<str:job_id>", store_views.StoreJobView.as_view(), name="v1-store-job"),
    path("store/sources", store_views.StoreSourcesView.as_view(), name="v1-store-sources"),
    path("store/sources/<str:name>", store_views.StoreSourceView.as_view(), name="v1-store-source"),
    path("plugins", views.PluginsView.as_view(), name="plugins"),
    path("plugins/<str:plugin_id>", views.PluginView.as_view(), name="plugin"),
    path(
        "plugins/<str:plugin_id>/ui-credential",
        views.UiCredentialView.as_view(),
        name="plugin-ui-credential",
    ),
    path("store/runtime", views.RuntimeView.as_view(), name="store-runtime"),
]
