"""The host's project package: settings, URL map, ASGI/Celery wiring and the supervisor."""

from hostmgmt.celery import app as celery_app

__all__ = ["celery_app"]
