from django.apps import AppConfig

from streaming.sessions import planes


class CompatConfig(AppConfig):
    """The GameStream (Moonlight) plane: protocol, engine, listener."""

    name = "compat"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        planes.register("compat", "compat.session:main", warm=("compat.engine.stream",))
