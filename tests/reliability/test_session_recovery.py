"""What the host does for a session whose process died without its own cleanup, and for a
slot claim a Redis restart lost, in process against a real Redis:

* `lifecycle.recover_lost` (forked by the session manager when it reaps a session process
  killed by a signal) hands back what the record names: the processes the session owned are
  killed, the record and slot claim go, and `session.ended` says `session_lost` and why.
* `admission.keep_slot` takes back a claim that vanished (the private Redis keeps nothing
  across a restart) but never one another session holds.
"""

from __future__ import annotations

import json
import subprocess
import time

import pytest

from streaming.sessions import admission, lifecycle, registry, sound

pytestmark = pytest.mark.django_db


@pytest.fixture
def r(redis_db, restore_config):
    return redis_db


def _dead_pid() -> int:
    p = subprocess.Popen(["true"])
    p.wait()
    return p.pid


def test_a_lost_session_is_handed_back_and_ends_with_session_lost(r, monkeypatch):
    emitted = []
    monkeypatch.setattr("hooks.events.emit", lambda kind, payload: emitted.append((kind, payload)))
    pid = _dead_pid()
    owned = subprocess.Popen(["sleep", "60"])  # the session's own sound server, say
    try:
        rec = {"id": "0badc0de", "plane": "compat", "pid": pid, "client": "Deck",
               "fingerprint": "ab" * 32, "width": 640, "height": 360, "fps": 30, "app": "7",
               "app_title": "Sleeper", "display_slot": None, "owned_pids": [owned.pid],
               "t_start": time.time()}  # fmt: skip
        r.hset(registry.LIVE, rec["id"], json.dumps(rec))
        r.set(admission.slot_key(0), rec["id"])
        other = {**rec, "id": "0000beef", "pid": _dead_pid() + 100000}
        r.hset(registry.LIVE, other["id"], json.dumps(other))

        assert lifecycle.recover_lost(pid, 9) == ["0badc0de"]
        assert owned.wait(5) == -9
        assert r.hget(registry.LIVE, "0badc0de") is None
        assert r.get(admission.slot_key(0)) is None
        assert r.hget(registry.LIVE, "0000beef") is not None  # another process's record
        ((kind, payload),) = emitted
        assert kind == "session.ended" and payload["reason"] == "session_lost"
        assert payload["error"] == f"the session process (pid {pid}) was killed by SIGKILL"
        assert payload["session"]["id"] == "0badc0de" and payload["session"]["client"] == "Deck"
    finally:
        owned.kill()
        owned.wait()


def test_keep_slot_takes_back_a_claim_redis_lost_but_not_one_another_session_holds(r):
    r.set(admission.slot_key(1), "aaaa0001")
    assert admission.keep_slot("aaaa0001", 1)
    r.flushall()  # Redis killed and restarted: nothing kept
    assert admission.keep_slot("aaaa0001", 1)
    assert r.get(admission.slot_key(1)) == b"aaaa0001" and r.ttl(admission.slot_key(1)) > 0
    r.set(admission.slot_key(1), "bbbb0002")  # another launch took the slot meanwhile
    assert not admission.keep_slot("aaaa0001", 1)
    assert r.get(admission.slot_key(1)) == b"bbbb0002"


def test_a_lost_session_on_a_desktops_sound_server_leaves_no_null_sink(r, monkeypatch):
    """On a sound server the host did not start (a desktop's own PulseAudio, named by the
    host's environment), the dead session's null sink is unloaded; another sink stays."""
    import shutil
    from types import SimpleNamespace

    from media.audio.capture import SoundServer, VirtualSink

    if not shutil.which("pulseaudio") or not shutil.which("pactl"):
        pytest.skip("PulseAudio is not installed")
    monkeypatch.setattr("hooks.events.emit", lambda kind, payload: None)
    desktop = SoundServer(reuse=False).start()  # stands for the desktop's own server
    try:
        for key, value in desktop.env.items():
            monkeypatch.setenv(key, value)
        theirs = VirtualSink(desktop, "someone_elses").load()
        ours = VirtualSink(SoundServer(), "session_0badc0de").load()  # found via the env
        audio = SimpleNamespace(server=ours.server, sink=ours)
        left = sound.leftovers(audio)
        sink = {"name": "session_0badc0de", "module": ours.module}
        assert left == {"owned_pids": [], "sound_sink": sink}
        pid = _dead_pid()
        rec = {"id": "0badc0de", "plane": "compat", "pid": pid, "client": "Deck",
               "fingerprint": "ab" * 32, "width": 640, "height": 360, "fps": 30, "app": "7",
               "app_title": "Sleeper", "display_slot": None, **left,
               "t_start": time.time()}  # fmt: skip
        r.hset(registry.LIVE, rec["id"], json.dumps(rec))

        def sinks() -> list[str]:
            return [
                line.split("\t")[1] for line in desktop.pactl("list", "short", "sinks").splitlines()
            ]

        assert "session_0badc0de" in sinks()
        assert lifecycle.recover_lost(pid, 9) == ["0badc0de"]
        assert "session_0badc0de" not in sinks()
        assert "someone_elses" in sinks()
        # A record whose module number now belongs to another module unloads nothing.
        assert not sound.unload_sink({"name": "session_0badc0de", "module": theirs.module})
        assert "someone_elses" in sinks()
    finally:
        desktop.stop()
