"""Game lifecycle with real processes: launcher scripts that start the "game" and leave."""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time

import pytest

from common import procs
from games import lifecycle, registry
from games import session_settings as game_settings
from tests.games.conftest import STUBBORN, game_events, wait_for

HINTS = {"process_name": "mygame"}


def launched(item, session_id=1, app_id="custom:g1", detect=HINTS, **kw):
    kw.setdefault("exit_timeout", 1.0)
    return lifecycle.game_launched(
        session_id, app_id, "My Game", store="custom", client="Deck", plane="compat",
        detect=detect, pgid=item.pgid, **kw,
    )  # fmt: skip


def running(key):
    return wait_for(lambda: (registry.get(key) or {}).get("state") == "running")


def use_settings(**fields):
    game_settings.save(game_settings.SessionSettings(**fields))


def test_running_names_the_child_and_player_quit_is_exited(state, launch, on_game_exit):
    item = launch()
    calls = []
    on_game_exit(lambda sid, reason: calls.append((sid, reason)))
    key = launched(item)
    assert running(key)
    pid = item.game_pid()
    rec = registry.get(key)
    assert rec["game"]["pid"] == pid and rec["game"]["name"] == "mygame"  # not the launcher
    [ev] = wait_for(lambda: game_events("game.running"))
    assert ev["game"] == {"app": "custom:g1", "title": "My Game", "store": "custom",
                          "client": "Deck", "plane": "compat", "session_id": 1}  # fmt: skip
    assert lifecycle.active_games() == [
        {"session_id": 1, "client": "Deck", "app_id": "custom:g1", "title": "My Game",
         "store": "custom", "plane": "compat", "state": "running"}
    ]  # fmt: skip

    os.kill(pid, signal.SIGKILL)  # the player quits (or it crashes)
    assert wait_for(lambda: game_events("game.exited"))
    [ev] = game_events("game.exited")
    assert ev["reason"] == "exited" and ev["game"]["title"] == "My Game"
    assert wait_for(lambda: calls) == [(1, "exited")]  # session_on_game_exit: end the session
    assert lifecycle.active_games()[0]["state"] == "exited"


def test_session_only_hints_find_the_game(state, launch):
    item = launch()
    key = launched(item, detect=None)  # nothing named: the launched session's leaf process
    assert running(key)
    # A short-lived helper of the launcher (its `dirname`) may be seen first; the watcher then
    # hands over to the newer process of the same session, the game.
    pid = item.game_pid()
    assert wait_for(lambda: registry.get(key)["game"]["pid"] == pid)
    assert len(wait_for(lambda: game_events("game.running"))) == 1  # one, despite the handover


def test_session_on_game_exit_off_keeps_the_session(state, launch, on_game_exit):
    use_settings(session_on_game_exit=False)
    item = launch()
    calls = []
    on_game_exit(lambda sid, reason: calls.append(sid))
    key = launched(item)
    assert running(key)
    os.kill(item.game_pid(), signal.SIGKILL)
    assert wait_for(lambda: game_events("game.exited"))
    time.sleep(0.1)
    assert calls == []


@pytest.mark.django_db(transaction=True)
def test_host_close_is_terminated_and_runs_undo(state, launch, tmp_path):
    from hooks import prep

    undone = tmp_path / "undone"
    prep.run_do("sess-1", [{"do": "true", "undo": f"echo undone > {undone}"}])
    item = launch()
    key = launched(item, prep_key="sess-1")
    assert running(key)
    pid = item.game_pid()
    t0 = time.monotonic()
    assert lifecycle.close_game(session_id=1) == 1
    took = time.monotonic() - t0
    assert not procs.alive(pid)
    [ev] = game_events("game.exited")
    assert ev["reason"] == "terminated"
    assert undone.read_text().strip() == "undone"
    assert took < 1.0, took  # SIGTERM was enough: no wait for the exit timeout
    assert lifecycle.close_game(session_id=1) == 0  # nothing left to close


def test_stubborn_game_is_killed_after_exit_timeout(state, launch):
    item = launch(STUBBORN)
    key = launched(item, exit_timeout=0.6)
    assert running(key)
    pid = item.game_pid()
    assert wait_for(lambda: (item.install / "ready").exists())  # SIGTERM is ignored from now
    t0 = time.monotonic()
    lifecycle.close_game(app_id="custom:g1")
    took = time.monotonic() - t0
    assert not procs.alive(pid)
    assert 0.55 <= took < 3.0, took
    assert [e["reason"] for e in game_events("game.exited")] == ["terminated"]


def test_keep_leaves_the_game_running(state, launch):
    item = launch()
    key = launched(item)
    assert running(key)
    assert lifecycle.session_ended(1, deliberate=True) == {"closed": 0, "grace": 0, "kept": 1}
    assert procs.alive(item.game_pid())
    [game] = lifecycle.active_games()
    assert game["state"] == "running" and "session_id" not in game


@pytest.mark.parametrize("deliberate, closed", [(True, 1), (False, 0)])
def test_on_quit_ends_the_game_on_a_deliberate_stop_only(state, launch, deliberate, closed):
    use_settings(game_on_session_end="on_quit")
    item = launch()
    key = launched(item)
    assert running(key)
    assert lifecycle.session_ended(1, deliberate=deliberate)["closed"] == closed
    assert procs.alive(item.game_pid()) is (not closed)
    reasons = [e["reason"] for e in game_events("game.exited")]
    assert reasons == (["terminated"] if closed else [])


def test_always_vanish_waits_out_grace_then_ends(state, launch):
    use_settings(game_on_session_end="always", disconnect_grace_seconds=600)
    item = launch()
    key = launched(item)
    assert running(key)
    assert lifecycle.session_ended(1, deliberate=False)["grace"] == 1
    [game] = lifecycle.active_games()
    assert game["state"] == "grace" and 598 <= game["grace_remaining_s"] <= 600
    assert "session_id" not in game
    assert lifecycle.tick() == 0  # not due yet
    registry.update(lambda rs: rs[key].update(grace_deadline=time.time() - 1))
    assert lifecycle.tick() == 1
    assert wait_for(lambda: not procs.alive(item.game_pid()))
    assert wait_for(lambda: game_events("game.exited"))[0]["reason"] == "terminated"


def test_only_the_periodic_tick_ends_an_expired_grace_window(state, launch, monkeypatch):
    """No timer of the session's process: the supervisor's `game-lifecycle` job ends it."""
    expired = game_settings.SessionSettings(
        game_on_session_end="always", disconnect_grace_seconds=0
    )
    monkeypatch.setattr(game_settings, "load", lambda: expired)
    item = launch()
    key = launched(item)
    assert running(key)
    assert lifecycle.session_ended(1, deliberate=False)["grace"] == 1
    time.sleep(0.5)
    assert registry.get(key)["state"] == "grace" and procs.alive(item.game_pid())
    assert lifecycle.tick() == 1
    assert wait_for(lambda: not procs.alive(item.game_pid()))


def test_a_returning_client_takes_its_game_out_of_grace(state, launch):
    use_settings(game_on_session_end="always")
    item = launch()
    key = launched(item)
    assert running(key)
    lifecycle.session_ended(1, deliberate=False)
    assert lifecycle.resume_game(2, app_id="custom:g1")
    [game] = lifecycle.active_games()
    assert game["state"] == "running" and game["session_id"] == 2
    assert lifecycle.end_waiting_games() == 0
    assert procs.alive(item.game_pid())


def test_a_dead_watcher_process_does_not_lose_the_game(state, launch):
    """A worker restart: the record survives in the state file and tick() adopts it."""
    use_settings(game_on_session_end="always")
    item = launch()
    key = launched(item)
    assert running(key)
    lifecycle.session_ended(1, deliberate=False)
    lifecycle._watchers.pop(key).stop()  # the worker (and its watcher) is gone
    dead = subprocess.Popen(["true"])  # a pid that no longer runs
    dead.wait()
    registry.update(lambda rs: rs[key].update(owner=[dead.pid, 1.0]))
    lifecycle.tick()
    assert registry.get(key)["owner"][0] == os.getpid()
    # Ended from "another process": the recorded pid is signalled after its start time check.
    lifecycle._watchers.pop(key).stop()
    assert lifecycle.end_waiting_games("custom:g1") == 1
    assert not procs.alive(item.game_pid())
    assert [e["reason"] for e in game_events("game.exited")] == ["terminated"]


def unseen(key):
    return wait_for(lambda: (registry.get(key) or {}).get("unseen"), 3.0)


def test_a_title_the_hints_never_find_exits_with_its_launched_group(state, launch, on_game_exit):
    """Hints that match nothing: the launched group stands in for the game; when it is gone,
    `game.exited` (`exited`, a reason the spec lists) and the session ends as for any game."""
    item = launch()  # its "mygame" orphan stays in the launched group
    calls = []
    on_game_exit(lambda sid, reason: calls.append((sid, reason)))
    key = launched(item, detect={"process_name": "no-such-game"}, find_timeout=0.3)
    assert unseen(key)
    pid = item.game_pid()
    assert procs.alive(pid) and registry.get(key)["state"] == "launching"
    assert lifecycle.active_games()[0]["state"] == "launching"  # still the session's title
    assert game_events("game.exited") == [] and calls == []
    os.kill(pid, signal.SIGKILL)  # the last process of the group goes
    assert wait_for(lambda: game_events("game.exited"), 3.0)
    [ev] = game_events("game.exited")
    assert ev["reason"] == "exited" and ev["game"]["title"] == "My Game"
    assert game_events("game.running") == []  # the game itself was never seen
    assert wait_for(lambda: calls) == [(1, "exited")]
    assert registry.get(key)["state"] == "exited"


def test_closing_a_title_the_hints_never_found_is_terminated_once(state, launch, on_game_exit):
    item = launch()
    calls = []
    on_game_exit(lambda sid, reason: calls.append((sid, reason)))
    key = launched(item, detect={"process_name": "no-such-game"}, find_timeout=0.3,
                   exit_timeout=0.5)  # fmt: skip
    assert unseen(key)
    pid = item.game_pid()
    assert lifecycle.close_game(session_id=1) == 1
    assert wait_for(lambda: not procs.alive(pid))
    time.sleep(0.5)  # the group follower polls every 0.2 s: give it the chance to add one
    assert [e["reason"] for e in game_events("game.exited")] == ["terminated"]
    assert calls == []


def test_an_unseen_title_without_a_launched_group_exits_at_once(state):
    key = lifecycle.game_launched(
        1,
        "custom:g9",
        "Ghost",
        client="Deck",
        detect={"process_name": "no-such-game"},
        find_timeout=0.2,
    )
    assert wait_for(lambda: game_events("game.exited"), 3.0)
    assert [e["reason"] for e in game_events("game.exited")] == ["exited"]
    assert registry.get(key)["state"] == "exited"


def test_concurrent_closes_end_the_game_once(state, launch):
    use_settings(game_on_session_end="always")
    item = launch()
    key = launched(item)
    assert running(key)
    lifecycle.session_ended(1, deliberate=False)
    results = []
    threads = [threading.Thread(target=lambda: results.append(lifecycle.end_waiting_games()))
               for _ in range(4)]  # fmt: skip
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(results) == [0, 0, 0, 1]
    assert len(game_events("game.exited")) == 1


def test_closing_a_title_still_launching_ends_its_group(state, launch):
    item = launch()
    key = launched(item, detect={"process_name": "not-yet"}, find_timeout=None, exit_timeout=0.3)
    pid = item.game_pid()  # a helper of the launch that the hints do not name
    assert registry.get(key)["state"] == "launching"
    assert lifecycle.close_game(session_id=1) == 1
    assert wait_for(lambda: not procs.alive(pid))
    assert [e["reason"] for e in game_events("game.exited")] == ["terminated"]
    assert game_events("game.running") == []


@pytest.mark.django_db(transaction=True)
def test_keep_runs_the_undo_steps_at_session_end(state, launch, tmp_path):
    from hooks import prep

    undone = tmp_path / "undone"
    prep.run_do("sess-2", [{"do": "true", "undo": f"echo x >> {undone}"}])
    item = launch()
    key = launched(item, prep_key="sess-2")
    assert running(key)
    lifecycle.session_ended(1, deliberate=True)
    assert undone.read_text() == "x\n" and procs.alive(item.game_pid())
    os.kill(item.game_pid(), signal.SIGKILL)
    assert wait_for(lambda: game_events("game.exited"))
    time.sleep(0.2)
    assert undone.read_text() == "x\n"  # once, not again when the game exits


def test_a_game_that_ended_while_nobody_watched_is_reported_exited(state, launch):
    item = launch()
    key = launched(item)
    assert running(key)
    lifecycle._watchers.pop(key).stop()
    dead = subprocess.Popen(["true"])
    dead.wait()
    registry.update(lambda rs: rs[key].update(owner=[dead.pid, 1.0]))
    os.kill(item.game_pid(), signal.SIGKILL)
    assert wait_for(lambda: not procs.alive(item.game_pid()))
    lifecycle.tick()
    assert [e["reason"] for e in game_events("game.exited")] == ["exited"]
    assert registry.get(key)["state"] == "exited"
