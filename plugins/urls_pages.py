"""The console's plugin pages: the list and each plugin's own UI behind the console's login."""

from django.urls import path

from plugins import pages

urlpatterns = [
    path("plugins", pages.plugins_page, name="console-plugins"),
    path("plugins/<str:plugin_id>/ui/", pages.ui_proxy, name="console-plugin-ui"),
    path("plugins/<str:plugin_id>/ui/<path:path>", pages.ui_proxy),
]
