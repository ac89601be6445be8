from django.apps import AppConfig


class StreamingConfig(AppConfig):
    name = "streaming"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # Django app loading: revocations reaches the session services and their models
        from streaming import revocations

        revocations.subscribe()
