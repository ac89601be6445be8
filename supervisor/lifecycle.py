"""What the supervisor announces when the host comes up and winds down.

The event bus (`hooks.events`) turns these into `host.started` / `host.stopping`.
"""

from __future__ import annotations

import logging
import time

from common.version import VERSION
from console import update_apply
from hooks import conf, event_kinds, events
from hostconfig import store

log = logging.getLogger("supervisor")


def host_facts() -> dict:
    """The payload of host.started and host.stopping (spec: version, compat plane enabled)."""
    try:
        compat = bool(store.get("compat_enabled"))
    except Exception:  # an unreadable config must not stop the announcement
        compat = False
    return {"version": VERSION, "gamestream": compat}


def announce_started() -> None:
    log.info("host started")
    events.emit(event_kinds.HOST_STARTED, host_facts())
    update_apply.announce_applied()  # the first start of a version an apply switched to
    _queue_prep_recovery()


def _queue_prep_recovery() -> None:
    """Prep `undo` steps a crashed session still owes run once the host is back."""
    try:
        from hostmgmt.celery import app  # the wiring's Celery app, reached lazily

        app.send_task("hooks.prep_undo_orphans", queue=conf.HOOKS_QUEUE, retry=False)
    except Exception:  # recovery is best-effort; the rows stay for next time
        log.warning("could not queue prep undo recovery")


def announce_stopping(grace_s: float | None = None, *, abort=None) -> bool:
    """Emit host.stopping while every process still runs, and give the hook firings it queued
    up to `grace_s` (HOST_STOPPING_HOOKS_GRACE_S) to finish. True when they all finished.

    Called before the supervisor stops its children: the hooks worker must still be there to
    run them, and daphne to send the event to SSE consumers. `abort()` cuts the wait short (a
    second SIGTERM/SIGINT).
    """
    grace = conf.stopping_hooks_grace_s() if grace_s is None else grace_s
    log.info("host stopping")
    started = time.monotonic()
    _event, queued, left = events.emit_and_wait(
        event_kinds.HOST_STOPPING, host_facts(), grace, abort=abort
    )
    waited = time.monotonic() - started
    if left:
        log.warning(
            "%d of %d host.stopping hook firing(s) still running after %.1f s; stopping anyway",
            len(left),
            queued,
            waited,
        )
        return False
    if queued:
        log.info("%d host.stopping hook firing(s) finished in %.1f s", queued, waited)
    return True
