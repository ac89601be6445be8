"""Per-app prep steps: `do` commands before a launch, `undo` commands at session end.

`run_do(session_key, steps)` runs every `do` in order, synchronously (the launch waits), 30 s
each; a failed `do` is logged, the sequence goes on, and that step's `undo` is not owed. Each
owed `undo` is persisted (PrepRun rows) the moment its `do` succeeds, so `run_undo` can still
run them in reverse order after the session, the engine or the whole host crashed:
`undo_orphans()` at host start runs whatever a dead session left behind. Undo is best-effort:
every step runs even when an earlier one fails, and each is forgotten once tried.
"""

from __future__ import annotations

import json
import logging
import threading

from django.db import close_old_connections

from hooks import deliveries, runner
from hooks.models import Delivery, PrepRun

log = logging.getLogger("hooks.prep")

STEP_TIMEOUT_S = 30
_undo_lock = threading.Lock()


def app_env(app_id: str | None = None, app_title: str | None = None) -> dict[str, str]:
    """PF_APP_ID on the native plane, PF_APP_TITLE on the compat plane."""
    env = {}
    if app_id:
        env["PF_APP_ID"] = app_id
    if app_title:
        env["PF_APP_TITLE"] = app_title
    return env


def _run(command: str, env: dict[str, str], what: str, timeout_s: float) -> runner.Result:
    result = runner.run_command(command, stdin=b"{}", env=env, timeout_s=timeout_s)
    if result.outcome != "ok":
        log.warning("prep %s step failed: %s", what, result.error)
    deliveries.record(
        Delivery.PREP,
        f"{what}: {command}",
        None,
        result.outcome,
        exit_code=result.exit_code,
        duration_ms=result.duration_ms,
        error=result.error,
    )
    return result


def run_do(
    session_key: str,
    steps: list[dict],
    env: dict[str, str] | None = None,
    timeout_s: float = STEP_TIMEOUT_S,
) -> list[runner.Result]:
    """Run each `do` in order; persist the `undo` of each one that succeeded."""
    env = dict(env or {})
    close_old_connections()
    results = []
    for position, step in enumerate(steps):
        do = (step.get("do") or "").strip() if isinstance(step, dict) else ""
        undo = (step.get("undo") or "").strip() if isinstance(step, dict) else ""
        # A step with only an undo: nothing ran, so it is owed unconditionally.
        result = _run(do, env, "do", timeout_s) if do else runner.Result("ok")
        results.append(result)
        if result.outcome == "ok" and undo:
            PrepRun.objects.update_or_create(
                session_key=session_key,
                position=position,
                defaults={"undo": undo, "app_env": env},
            )
    return results


def run_undo(session_key: str, timeout_s: float = STEP_TIMEOUT_S) -> list[runner.Result]:
    """Run the owed undos of one session, newest first; each is forgotten once tried."""
    close_old_connections()
    results = []
    with _undo_lock:  # two session-end paths racing must not run an undo twice
        for row in PrepRun.objects.filter(session_key=session_key).order_by("-position"):
            PrepRun.objects.filter(pk=row.pk).delete()
            results.append(_run(row.undo, dict(row.app_env or {}), "undo", timeout_s))
    return results


def owed_sessions() -> list[str]:
    close_old_connections()
    return sorted(set(PrepRun.objects.values_list("session_key", flat=True)))


def undo_orphans(live_sessions: set[str] | None = None) -> int:
    """Run the undos of sessions that are gone (all of them at host start); returns how many
    sessions were cleaned up."""
    count = 0
    for key in owed_sessions():
        if live_sessions and key in live_sessions:
            continue
        log.info("running owed prep undo steps of ended session %s", json.dumps(key))
        run_undo(key)
        count += 1
    return count
