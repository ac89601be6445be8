"""`kill -9` during writes of every editable file (docs/host-state.md): host.conf (and host.env),
hooks.json, apps.json and the pairing state (paired clients, in the SQLite database). A writer
process does 100 alternating writes of two valid documents and is SIGKILLed at a random moment,
several times over: after each kill the file parses and holds one of the two documents (or
the one before the first write), and no temp file of a dead writer is left behind once the
next write has run."""

from __future__ import annotations

import json
import os
import random
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.support import kill9_writer as w

ROOT = Path(__file__).resolve().parents[2]
KILLS = 4
SEED = 2126


def _read(kind: str, sd: Path):
    """The current document of `kind`, parsed the way a strict reader would (raises if torn)."""
    if kind == "config":
        lines = [ln for ln in (sd / "host.conf").read_text().splitlines() if ln.strip()]
        env = (sd / "host.env").read_text()
        assert env.endswith("\n") and "HOST_MAX_SESSIONS=" in env, env
        return lines
    if kind == "hooks":
        return json.loads((sd / "hooks.json").read_text())["hooks"]
    if kind == "apps":
        return json.loads((sd / "apps.json").read_text())
    db = sqlite3.connect(sd / "db.sqlite3")
    try:
        assert db.execute("PRAGMA integrity_check").fetchone() == ("ok",)
        return [r[0] for r in db.execute("SELECT name FROM pairing_pairedclient")]
    finally:
        db.close()


def _allowed(kind: str):
    if kind == "config":
        return [["max_sessions = 2"], ["max_sessions = 3"]]
    if kind == "hooks":
        return w.HOOKS
    if kind == "apps":
        return w.APPS
    return [[name] for name in w.NAMES]


def _temps(sd: Path) -> list[str]:
    return [n for n in os.listdir(sd) if n.endswith(".tmp")]


@pytest.mark.parametrize("kind", ["config", "hooks", "apps", "pairing"])
def test_kill_9_mid_write_leaves_the_old_or_the_new_document(kind, tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("HOST_")}
    env["HOST_STATE_DIR"] = str(tmp_path)
    server = subprocess.Popen(
        [sys.executable, str(ROOT / "tests" / "support" / "kill9_writer.py"), kind],
        env=env,
        cwd=ROOT,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    rng = random.Random(f"{SEED}-{kind}")
    allowed = _allowed(kind)
    completed = []
    try:
        for _ in range(KILLS):
            server.stdin.write("round\n")
            server.stdin.flush()
            pid = int(server.stdout.readline().split()[1])
            # Kill after a random count of completed writes (the writer runs on meanwhile, so
            # the kill lands mid-write or between two), not after a random time: on a quiet
            # machine 100 writes can all finish within 0.3 s, before a timed kill lands.
            writes = rng.randint(1, w.WRITES // 2)
            for _ in range(writes):
                assert server.stdout.readline().strip() == "w"
            time.sleep(rng.uniform(0.0, 0.002))
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass  # it finished first: counted below, and the last check wants a real kill
            while (line := server.stdout.readline().strip()) != "reaped":
                assert line == "w", line
                writes += 1
            completed.append(writes)
            assert _read(kind, tmp_path) in allowed, f"torn after {writes} writes"
        # Another round writes at least once: a dead writer's temp file goes with that write.
        server.stdin.write("round\n")
        server.stdin.flush()
        server.stdout.readline()
        deadline = time.monotonic() + 60
        while server.stdout.readline().strip() != "w" and time.monotonic() < deadline:
            pass
        leftovers = [n for n in _temps(tmp_path) if not n.startswith(".db.")]
        assert len(leftovers) <= 1, leftovers  # at most the live writer's own, mid-write
    finally:
        server.kill()
        server.wait()
    assert any(n < w.WRITES for n in completed), f"no kill landed mid-run: {completed}"
    print(f"{kind}: writes completed before each kill: {completed}")
