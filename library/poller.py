"""Noticing store changes without inotify: the supervisor's `library-poll` periodic job.

Every `HOST_LIBRARY_POLL_S` seconds it stats the store files (mtime + size of the manifests,
library dirs and databases; no file is read) and enqueues `rescan_store` for a store whose
signature moved; it also notices hand edits of `apps.json` and emits `library.changed`.
The first run records the signatures and enqueues one `rescan_all`: the host's start rescan,
once per host (the supervisor is one process; a `worker_ready` handler would run once per worker,
and the host has two).
"""

from __future__ import annotations

import logging

from library import catalog, services
from library.scanners import SCANNERS
from library.tasks import rescan_all, rescan_store

log = logging.getLogger("library.poller")


class StorePoller:
    def __init__(self):
        self.last: dict[str, list] = {}
        self.start_rescan_queued = False

    def __call__(self) -> None:
        if not self.start_rescan_queued:
            try:
                rescan_all.delay()
                self.start_rescan_queued = True
            except Exception:  # no broker yet: the next run tries again
                log.exception("queueing the start rescan failed")
        for store, scanner in SCANNERS.items():
            try:
                sig = scanner.signature()
            except Exception:  # a store dir vanishing mid-stat is not fatal
                log.exception("stat of %s store files failed", store)
                continue
            if store in self.last and self.last[store] != sig:
                log.info("%s store files changed; rescanning", store)
                rescan_store.delay(store)
            self.last[store] = sig
        try:
            if catalog.hand_edited():
                log.info("apps.json was edited by hand")
                services.emit_changed("manual")
        except Exception:  # a broken or unreadable file is reported elsewhere
            log.exception("checking apps.json failed")
