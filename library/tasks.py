"""Celery tasks of the library.

Rescans run at host start and when a store's files change (`library.poller`, the supervisor's
`library-poll` periodic job, enqueues `rescan_all` once, then `rescan_store`), and on demand
(`POST /api/v1/library/scan`, `manage.py rescan_library`).
"""

from __future__ import annotations

from celery import shared_task

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
