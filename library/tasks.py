"""Celery tasks of the library.

Rescans run on worker start, on demand (`POST /api/v1/library/scan`, `manage.py
rescan_library`) and when a store's files change (`library.poller`, a periodic job of the
supervisor, enqueues `rescan_store`).
"""

from __future__ import annotations

from celery import shared_task
from celery.signals import worker_ready

from library import art, services
from library.scanners import SCANNERS


@shared_task(ignore_result=True)
def rescan_store(store: str) -> None:
    if store in SCANNERS:
        services.rescan(store)


@shared_task(ignore_result=True)
def rescan_all() -> None:
    services.rescan_all()


@shared_task(ignore_result=True, soft_time_limit=60)
def fetch_art(appid: int, kind: str) -> None:
    art.fetch_from_cdn(int(appid), str(kind))


@worker_ready.connect
def _on_worker_ready(sender=None, **kwargs) -> None:
    """A one-off rescan when a worker starts (not periodic work: see library.poller)."""
    rescan_all.delay()
