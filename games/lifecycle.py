"""The lifetime of every launched game: running, exited, waiting out its session's grace.

The engine calls, in the worker that runs the session:

* `game_launched(...)` right after starting the title: records it (registry, state file) and
  starts a `GameWatcher`; `game.running` goes out once when the title's own process is seen,
  `game.exited` once when it is gone, with `reason` `exited` (player quit) or `terminated`
  (the host closed it: `close_game`, a session end per the settings, `POST /game/end`).
* `session_ended(session_id, deliberate)` when the session is over: SessionSettings decide
  (read from the file now, so a PUT reaches live sessions): `keep` leaves the game running,
  `on_quit` ends it on a deliberate stop only, `always` ends it on a deliberate stop and after
  `disconnect_grace_seconds` when the client vanished (state `grace`).
* `resume_game(session_id, app_id)` when a client comes back inside the grace window.
* `on_game_exit(callback)` once: with `session_on_game_exit`, it is called with
  `(session_id, reason)` when a live session's game exits, so the engine ends that session.

Every host close goes through `close_game`: SIGTERM to the launched process group (or to the
game alone when the group is not ours), SIGKILL after the entry's `exit-timeout`, then the
entry's owed `undo` prep steps. It works from any process: the watcher's own process uses the
watcher; another (the API answering `POST /game/end`, the supervisor expiring a grace
window) signals the recorded pid after checking its start time, so a reused pid is safe.
Whoever marks the record exited first emits `game.exited` and runs the undo steps.
"""

from __future__ import annotations

import logging
import os
import threading
import time
import uuid
from collections.abc import Callable

import psutil

from common import procs
from games import closer, registry
from games import session_settings as game_settings
from games.detect import DetectHints
from games.watcher import REASON_NOT_FOUND, REASON_TERMINATED, GameEvent, GameWatcher
from hooks import event_kinds, events, prep

log = logging.getLogger("games")
active_games = registry.active_games  # ActiveGame records for GET /status

_watchers: dict[str, GameWatcher] = {}
_watchers_lock = threading.Lock()
_exit_callbacks: list = []
FIND_TIMEOUT_S = 60.0


# -- engine entry points ------------------------------------------------------------------
def game_launched(
    session_id: str | None,
    app_id: str | None,
    title: str,
    *,
    store: str | None = None,
    client: str = "",
    plane: str = event_kinds.PLANE_COMPAT,
    detect: dict | None = None,
    steam_appid: str | int | None = None,
    pgid: int | None = None,
    exit_timeout: float = 5.0,
    prep_key: str | None = None,
    find_timeout: float | None = FIND_TIMEOUT_S,
) -> str:
    """Record a launched title and start watching for it; returns the game's key.

    `pgid`: the launched command's pid, which leads its own session and process group.
    `prep_key`: the key its `do` steps were run under (hooks.prep), undone when it ends.
    """
    key = uuid.uuid4().hex[:16]
    hints = DetectHints.from_entry(detect, steam_appid, session=pgid)
    record = {
        "key": key,
        "session_id": session_id,
        "app_id": app_id or "",
        "title": title or "",
        "store": store or "",
        "client": client or "",
        "plane": plane,
        "hints": {
            "detect": {k: hints.__dict__[k] for k in ("install_dir", "exe", "process_name")},
            "steam_appid": hints.steam_appid,
            "session": pgid,
        },
        "pgid": pgid,
        "exit_timeout": max(float(exit_timeout or 0), 0.5),
        "prep_key": prep_key,
        "state": registry.LAUNCHING,
        "started_at": time.time(),
        "owner": _me(),
    }
    registry.put(key, record)
    # Another session's copy of the same title matches the same hints: never take it.
    taken = frozenset(
        (r.get("game") or {}).get("pid")
        for r in registry.all_records().values()
        if r.get("state") != registry.EXITED and (r.get("game") or {}).get("pid")
    )
    _watch(key, hints, find_timeout, taken)
    return key


def on_game_exit(callback) -> Callable[[], None]:
    """Register `callback(session_id, reason)`, called when a live session's game exits and
    `session_on_game_exit` is on (on the watcher's thread: return quickly). Returns the
    function that unregisters it."""
    if callback not in _exit_callbacks:
        _exit_callbacks.append(callback)

    def unregister() -> None:
        if callback in _exit_callbacks:
            _exit_callbacks.remove(callback)

    return unregister


def session_ended(session_id: str, deliberate: bool) -> dict:
    """Apply the session settings to the games of a session that ended.

    Returns `{"closed": n, "grace": n, "kept": n}`. Deliberate ends close at once (this waits
    for the games to go, up to their exit timeouts)."""
    conf = game_settings.load()
    policy = conf.game_on_session_end
    close_now = deliberate and policy in (game_settings.ON_QUIT, game_settings.ALWAYS)
    wait = not deliberate and policy == game_settings.ALWAYS  # vanished: grace, then end
    deadline = time.time() + conf.disconnect_grace_seconds

    def detach(records):
        mine = [
            r
            for r in records.values()
            if r.get("session_id") == session_id and r.get("state") != registry.EXITED
        ]
        out = [dict(r) for r in mine]
        for r in mine:
            r["session_id"] = None
            if not wait and not close_now:
                r["prep_key"] = None  # undone below, now; the game itself lives on
            if wait:
                r["state_before_grace"] = r["state"]
                r["state"], r["grace_deadline"] = registry.GRACE, deadline
        return out

    mine = registry.update(detach)
    counts = {"closed": 0, "grace": 0, "kept": 0}
    for r in mine:
        if wait:
            counts["grace"] += 1
        elif close_now:
            counts["closed"] += _close([r["key"]])
        else:
            counts["kept"] += 1
            _undo(r)  # the session is over: its prep steps are undone, the game lives on
    log.info(
        "session %s ended (%s, %s): %s",
        session_id,
        policy,
        "deliberate" if deliberate else "vanished",
        counts,
    )
    return counts


def resume_game(session_id: str, app_id: str | None = None, client: str | None = None) -> bool:
    """A client came back inside the grace window: its waiting game joins the new session."""

    def claim(records):
        for r in records.values():
            if r.get("state") != registry.GRACE or r.get("closing"):
                continue
            if app_id is not None and r.get("app_id") != app_id:
                continue
            if client is not None and r.get("client") != client:
                continue
            r["state"] = r.pop("state_before_grace", registry.RUNNING)
            r["session_id"], r["grace_deadline"] = session_id, None
            return True
        return False

    return bool(registry.update(claim))


def close_game(session_id: str | None = None, app_id: str | None = None) -> int:
    """The host closes a live session's title (`/api/apps/close`, `DELETE /session`):
    the games of that session (and app), or every game not already exited. Returns how many."""

    def pick(r):
        if r.get("state") == registry.EXITED:
            return False
        if session_id is not None and r.get("session_id") != session_id:
            return False
        return app_id is None or r.get("app_id") == app_id

    return _close([k for k, r in registry.all_records().items() if pick(r)])


def end_waiting_games(app_id: str | None = None, wait_s: float = 10.0) -> int:
    """`POST /game/end`: end games whose session is gone and that wait out their grace
    window (one app, or all). Games of live sessions are never touched. Returns how many.
    Waits at most `wait_s` (an entry's exit-timeout may be an hour); the rest goes on behind."""
    keys = [
        k
        for k, r in registry.all_records().items()
        if r.get("state") == registry.GRACE and (app_id is None or r.get("app_id") == app_id)
    ]
    return _close(keys, wait_s)


# How often the supervisor's `game-lifecycle` periodic job calls tick(). It alone ends
# expired grace windows: a grace window is 10 s at least, so a second late is within its
# promise, and the session's process (which saw the session end) is about to exit.
TICK_S = 1.0


def tick() -> int:
    """End expired grace windows; take over games whose watching process died. Cheap when
    nothing is due (one read of a small file); a supervisor periodic job calls it every TICK_S.
    Returns how many expired games it started closing (each on its own thread)."""
    now = time.time()
    records = registry.all_records()
    due = [
        k
        for k, r in records.items()
        if r.get("state") == registry.GRACE
        and not r.get("closing")
        and float(r.get("grace_deadline") or 0) <= now
    ]
    for key in due:
        threading.Thread(target=_close, args=([key],), name="game-grace", daemon=True).start()
    for key, r in records.items():
        if r.get("state") != registry.EXITED and not _owner_alive(r.get("owner")):
            _adopt(key, r)
    return len(due)


# -- watching --------------------------------------------------------------------------------
def _me() -> list:
    return [os.getpid(), psutil.Process().create_time()]


def _owner_alive(owner) -> bool:
    try:
        pid, created = owner
        return abs(psutil.Process(pid).create_time() - created) < 1.0
    except (TypeError, ValueError, psutil.Error):
        return False


def _watch(
    key: str, hints: DetectHints, find_timeout: float | None, exclude: frozenset = frozenset()
) -> None:
    watcher = GameWatcher(
        hints, lambda ev: _on_event(key, ev), find_timeout=find_timeout, exclude=exclude
    )
    with _watchers_lock:
        _watchers[key] = watcher
    watcher.start()


def _adopt(key: str, r: dict) -> None:
    """The process that watched this game is gone (worker restart): watch it from here."""

    def claim(records):
        rec = records.get(key)
        if rec is None or rec.get("state") == registry.EXITED or _owner_alive(rec.get("owner")):
            return False
        rec["owner"] = _me()
        return True

    if not registry.update(claim):
        return
    h = r.get("hints") or {}
    hints = DetectHints.from_entry(h.get("detect"), h.get("steam_appid"), session=h.get("session"))
    if r.get("game") and closer.verified(r["game"]) is None:
        _finish(key, "exited")  # it ended while nobody watched (a restart of the host, say)
        return
    log.info("watching game %s (%s) after its watcher's process died", key, r.get("title"))
    _watch(key, hints, FIND_TIMEOUT_S)


def _on_event(key: str, ev: GameEvent) -> None:
    if ev.state == "running":
        first = registry.update(lambda rs: _mark_running(rs.get(key), ev))
        rec = registry.get(key)
        if first and rec:
            events.emit(event_kinds.GAME_RUNNING, {"game": registry.game_ref(rec)})
        return
    rec = registry.get(key) or {}
    if ev.reason == REASON_NOT_FOUND:
        _not_found(key, rec)
        return
    reason = REASON_TERMINATED if rec.get("closing") else ev.reason or "exited"
    _finish(key, reason)
    _after_exit(key, rec, reason)


def _after_exit(key: str, rec: dict, reason: str) -> None:
    """The watcher is done; with `session_on_game_exit`, the game's live session ends."""
    with _watchers_lock:
        _watchers.pop(key, None)
    session_id = rec.get("session_id")
    live = session_id is not None and rec.get("state") != registry.GRACE
    if live and game_settings.load().session_on_game_exit:
        for cb in list(_exit_callbacks):
            try:
                cb(session_id, reason)
            except Exception:
                log.exception("session-on-game-exit callback failed")


def _not_found(key: str, rec: dict) -> None:
    """The hints never found the game: the launched command's process group stands in for it.

    The record stays (`launching`, `unseen`), so the session keeps waiting on the title and a
    host close still ends the group (`terminated`). When nothing of the group is left, the
    title is over: `game.exited` with reason `exited` (never `game.running`: the game itself
    was never seen), then `session_on_game_exit` as for any game. Without a launched group
    there is nothing left to follow: `exited` at once."""
    log.warning("game %s (%s) never seen: check its detect hints; following the launched "
                "command's process group instead", key, rec.get("title"))  # fmt: skip

    def mark(records):
        r = records.get(key)
        if r is not None and r.get("state") != registry.EXITED:
            r["unseen"] = True

    registry.update(mark)
    pgid = rec.get("pgid")
    if isinstance(pgid, int) and pgid > 0:
        threading.Thread(target=_follow_group, args=(key, pgid), name="game-group",
                         daemon=True).start()  # fmt: skip
    else:
        _group_gone(key)


def _follow_group(key: str, pgid: int, poll_s: float = 0.2) -> None:
    while procs.group_alive(pgid):
        if (registry.get(key) or {}).get("state", registry.EXITED) == registry.EXITED:
            return  # the host closed it meanwhile (terminated), or the record is gone
        time.sleep(poll_s)
    _group_gone(key)


def _group_gone(key: str) -> None:
    rec = registry.get(key) or {}
    if rec.get("closing"):
        return  # the host is closing it: the closer reports `terminated`
    if _finish(key, "exited"):
        _after_exit(key, rec, "exited")


def _mark_running(rec: dict | None, ev: GameEvent) -> bool:
    if rec is None or rec.get("state") == registry.EXITED:
        return False
    first = not rec.get("running_emitted")
    rec["running_emitted"] = True
    if rec.get("state") == registry.LAUNCHING:
        rec["state"] = registry.RUNNING
    elif rec.get("state") == registry.GRACE:
        rec["state_before_grace"] = registry.RUNNING
    rec["game"] = {"pid": ev.pid, "name": ev.name, "created": closer.created(ev.pid)}
    return first


def _finish(key: str, reason: str) -> bool:
    """Mark the game exited; the first caller emits `game.exited` and runs the undo steps."""

    def mark(records):
        rec = records.get(key)
        if rec is None or rec.get("state") == registry.EXITED:
            return None
        rec.update(state=registry.EXITED, reason=reason, exited_at=time.time())
        return dict(rec)

    rec = registry.update(mark)
    if rec is None:
        return False
    events.emit(event_kinds.GAME_EXITED, {"game": registry.game_ref(rec), "reason": reason})
    _undo(rec)
    return True


def _undo(rec: dict) -> None:
    if rec.get("prep_key"):
        try:
            prep.run_undo(rec["prep_key"])
        except Exception:  # best-effort, like every undo
            log.exception("undo steps of %s failed", rec.get("title"))


# -- closing -----------------------------------------------------------------------------
def _close(keys: list[str], wait_s: float | None = None) -> int:
    """Close each game as the host; returns how many this call claimed (others already were).
    Waits for them to go, or `wait_s` at most."""

    def claim(records):
        mine = []
        for k in keys:
            r = records.get(k)
            if r is not None and r.get("state") != registry.EXITED and not r.get("closing"):
                r["closing"] = True
                mine.append(dict(r))
        return mine

    claimed = registry.update(claim)
    threads = [threading.Thread(target=_close_one, args=(r,), daemon=True) for r in claimed]
    for t in threads:
        t.start()
    deadline = None if wait_s is None else time.monotonic() + wait_s
    for t in threads:
        t.join(None if deadline is None else max(deadline - time.monotonic(), 0))
    return len(claimed)


def _close_one(r: dict) -> None:
    key, timeout = r["key"], float(r.get("exit_timeout") or 5.0)
    with _watchers_lock:
        watcher = _watchers.get(key)
    try:
        if watcher is not None:
            watcher.terminate(timeout)
        game = r.get("game") or {}
        found = closer.verified(game)
        if found is not None:
            closer.signal_and_wait(found, r.get("pgid"), timeout)
        elif not game and r.get("pgid"):
            closer.end_group(int(r["pgid"]), r.get("started_at") or 0, timeout)  # still launching
        elif watcher is None:
            log.warning(
                "game %s (pid %s) already gone or not ours", r.get("title"), game.get("pid")
            )
    except Exception:
        log.exception("closing game %s failed", r.get("title"))
    _finish(key, REASON_TERMINATED)


def stop_watching() -> int:
    """Stop this process's game watchers; the games go on, and once this process is gone the
    supervisor's tick adopts them (`_adopt`). For a process that hands its games over (and a
    test that ends). Returns how many it stopped."""
    with _watchers_lock:
        watchers = list(_watchers.values())
        _watchers.clear()
    for w in watchers:
        w.stop()
    return len(watchers)
