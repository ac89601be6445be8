from django.apps import AppConfig

from streaming.sessions import planes


class NativeConfig(AppConfig):
    """The native (WebRTC) plane: offer, peer, relay, player page."""

    name = "native"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        planes.register(
            "native",
            "native.peer:main",
            warm=(
                "streaming.sessions.apps",
                "native.media",
                "native.sound",
                "native.inputs",
                "aiortc",
            ),
        )
