"""The native plane's WebSocket routes, for the project's `URLRouter` in `hostmgmt/asgi.py`."""

from django.urls import path

from native.wsrelay import PATH, RelayTokenAuthMiddleware, VideoRelayConsumer

websocket_urlpatterns = [
    path(PATH.lstrip("/"), RelayTokenAuthMiddleware(VideoRelayConsumer.as_asgi())),
]
