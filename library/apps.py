from django.apps import AppConfig


class LibraryConfig(AppConfig):
    name = "library"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # The art module queues CDN fetches through the task without importing the task module
        # (which imports it): the dependency points one way only.
        from library import art, tasks

        art.set_fetch_queue(tasks.fetch_art.delay)
