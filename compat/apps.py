from django.apps import AppConfig


class CompatConfig(AppConfig):
    """The GameStream (Moonlight) plane: protocol, engine, listener."""

    name = "compat"
    default_auto_field = "django.db.models.BigAutoField"
