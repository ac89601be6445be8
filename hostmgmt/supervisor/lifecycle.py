"""What the supervisor announces when the host comes up and winds down.

The event bus (`hooks.events`) turns these into `host.started` / `host.stopping`.
"""

from __future__ import annotations

import logging

from hooks import event_kinds, events
from hostmgmt.config import store
from hostmgmt.version import VERSION

log = logging.getLogger("hostmgmt.supervisor")


def announce_started() -> None:
    log.info("host started")
    try:
        compat = bool(store.get("compat_enabled"))
    except Exception:  # noqa: BLE001 - an unreadable config must not stop the announcement
        compat = False
    events.emit(event_kinds.HOST_STARTED, {"version": VERSION, "gamestream": compat})
    _queue_prep_recovery()


def _queue_prep_recovery() -> None:
    """Prep `undo` steps a crashed session still owes run once the host is back."""
    try:
        from hooks.conf import HOOKS_QUEUE
        from hostmgmt.celery import app

        app.send_task("hooks.prep_undo_orphans", queue=HOOKS_QUEUE, retry=False)
    except Exception:  # noqa: BLE001 - recovery is best-effort; the rows stay for next time
        log.warning("could not queue prep undo recovery")


def announce_stopping() -> None:
    log.info("host stopping")
    events.emit(event_kinds.HOST_STOPPING, {})
