from django.apps import AppConfig


class HostmgmtConfig(AppConfig):
    name = "hostmgmt"
    verbose_name = "Host"

    def ready(self) -> None:
        # Registers the OpenAPI extensions of both APIs' authentication classes (/api/docs).
        from hostmgmt.api import schema  # noqa: F401
