from django.apps import AppConfig


class FleetConfig(AppConfig):
    """Fleet membership, the members' pinned API client, refresh, event relay, placement."""

    name = "fleet"
    default_auto_field = "django.db.models.BigAutoField"
