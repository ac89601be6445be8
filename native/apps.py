from django.apps import AppConfig


class NativeConfig(AppConfig):
    """The native (WebRTC) plane: offer, peer, relay, player page."""

    name = "native"
    default_auto_field = "django.db.models.BigAutoField"
