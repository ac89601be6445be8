from django.apps import AppConfig


class DisplaysConfig(AppConfig):
    """Virtual displays: models, policy, state machine, reaper."""

    name = "displays"
    default_auto_field = "django.db.models.BigAutoField"
