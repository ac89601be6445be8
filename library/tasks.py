"""Celery tasks of the library, and the worker-side store poller.

Rescans run on worker start, on demand (`POST /api/v1/library/scan`, `manage.py
rescan_library`) and when a store's files change: a daemon thread in each worker's main process
stats the store files every `HOST_LIBRARY_POLL_S` seconds (mtime + size of the manifests,
library dirs and databases; no file is read) and enqueues `rescan_store` for a store whose
signature moved. The same thread notices hand edits of `apps.json` and emits `library.changed`.
"""

from __future__ import annotations

import logging
import threading
import time

from celery import shared_task
from celery.signals import worker_ready

from library import art, catalog, conf, services
from library.scanners import SCANNERS

log = logging.getLogger("library.tasks")


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


def _poll_forever(interval: float) -> None:
    last: dict[str, list] = {}
    while True:
        for store, scanner in SCANNERS.items():
            try:
                sig = scanner.signature()
            except Exception:  # noqa: BLE001 - a store dir vanishing mid-stat is not fatal
                log.exception("stat of %s store files failed", store)
                continue
            if store in last and last[store] != sig:
                log.info("%s store files changed; rescanning", store)
                rescan_store.delay(store)
            last[store] = sig
        try:
            if catalog.hand_edited():
                log.info("apps.json was edited by hand")
                services.emit_changed("manual")
        except Exception:  # noqa: BLE001 - a broken or unreadable file is reported elsewhere
            log.exception("checking apps.json failed")
        time.sleep(interval)


@worker_ready.connect
def _on_worker_ready(sender=None, **kwargs) -> None:
    rescan_all.delay()
    interval = conf.poll_interval_s()
    if interval > 0:
        threading.Thread(
            target=_poll_forever, args=(interval,), name="library-poll", daemon=True
        ).start()
