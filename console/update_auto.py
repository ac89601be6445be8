"""`update_auto`: an announced release applied by itself once no session has run for N minutes
(docs/updates.md, "Automatic apply").

The supervisor's `update-auto` periodic job calls an `AutoApply` every minute; when every
condition holds it starts the apply exactly as POST /api/v1/update/apply does without `force`
(`update_apply.start`), the job marked `by: auto`. It never starts:
- while the key is 0 (off, the default);
- while a session is live, or when that cannot be known (no Redis);
- within N minutes of a session's end (session history) or of a live one this job saw;
- beside a job in progress;
- for a version an apply was already tried for (the journal's `to`: failed, rolled back, or
  applied and undone by hand since): a broken release would otherwise loop every N minutes.
  Only a newer announced release, or the operator's Apply button, goes on from there.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from pathlib import Path

from django.conf import settings
from django.db import close_old_connections
from django.db.models import Max
from django.db.models.functions import Coalesce

from common.version import VERSION
from console import update_apply, updater
from streaming.models import SessionRecord
from streaming.sessions import registry

log = logging.getLogger(__name__)

TICK_S = 60.0
IN_PROGRESS = ("running", "staged", "switched")


def last_session_end() -> float:
    """When the newest session in the history ended (or started, when it has no end); 0 when
    the history is empty."""
    newest = SessionRecord.objects.aggregate(at=Max(Coalesce("t_end", "t_start")))["at"]
    return newest.timestamp() if newest else 0.0


class AutoApply:
    """One look per call; remembers when it last saw a live session (a session that never
    streamed leaves no history row)."""

    def __init__(self, root: Path | None = None, clock: Callable[[], float] = time.time):
        self.root = Path(settings.BASE_DIR) if root is None else root
        self.clock = clock
        self.last_live = 0.0
        self._said = ""

    def __call__(self) -> str:
        """Start the apply when due. Returns what it did or why not (logged when it changes)."""
        close_old_connections()  # a thread of the supervisor: no connection outlives the run
        try:
            reason = self.why_not()
            if reason is None:
                reason = self._start()
        finally:
            close_old_connections()
        if reason != self._said:
            log.info("update_auto: %s", reason)
            self._said = reason
        return reason

    def why_not(self) -> str | None:
        """None when an automatic apply is due now, else why not."""
        minutes = updater.auto_idle_minutes()
        if minutes <= 0:
            return "off"
        manifest = updater.load_state().get("manifest")
        if not isinstance(manifest, dict) or not updater.is_newer(
            str(manifest.get("version", "")), VERSION
        ):
            return "no newer release is announced"
        version = manifest["version"]
        if "artifacts" not in manifest:
            return f"{version} names no archive (a report-only manifest)"
        journal = update_apply.load_journal() or {}
        if journal.get("state") in IN_PROGRESS:
            return f"an apply to {journal.get('to')} is in progress"
        if journal.get("to") == version and not journal.get("retry"):
            return (
                f"an apply of {version} was tried already ({journal.get('state')}); it is not "
                "repeated by itself (apply it by hand, or wait for a newer release)"
            )
        now = self.clock()
        try:
            live = registry.live()
        except Exception as exc:  # no Redis: whether a session is live is unknown
            return f"session state unavailable ({type(exc).__name__})"
        if live:
            self.last_live = now
            return f"{len(live)} session(s) live"
        idle_s = now - max(self.last_live, last_session_end())
        if idle_s < minutes * 60:
            return f"a session ran {int(idle_s // 60)} min ago; waiting for {minutes} idle min"
        return None

    def _start(self) -> str:
        manifest = updater.load_state().get("manifest")
        try:
            journal = update_apply.start(False, manifest, self.root, by="auto")
        except update_apply.ApplyRefused as exc:
            return f"not started: {exc}"
        log.warning(
            "update_auto: no session for %d min; applying %s automatically (job %s)",
            updater.auto_idle_minutes(),
            journal["to"],
            journal["id"],
        )
        return f"started {journal['to']}"
