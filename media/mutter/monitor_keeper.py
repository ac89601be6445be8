"""Keeps one virtual monitor on the desktop user's GNOME (mutter) for as long as it runs.

`python -m media.mutter.monitor_keeper WIDTH HEIGHT`, started by displays/gnome_monitors.py.

Why a process of its own: mutter ties a ScreenCast session, and the virtual monitor that
`RecordVirtual` makes, to the D-Bus connection that created it. A display of the host's state
machine outlives the session that asked for it (lingering, pinned) and the process it ran in
(a Celery worker, a daphne child), so the connection lives here, and the monitor goes exactly
when this process does: SIGTERM (teardown), or killed (mutter drops the session with the
connection).

Mutter creates the monitor when the first consumer negotiates the stream's size, and keeps it
after that consumer leaves, so a one-frame gst-launch at WIDTHxHEIGHT brings it up; sessions
then capture it like any monitor (RecordMonitor of its connector). Mutter 43's virtual monitors
run at 60 Hz (a stream asking another frame rate never negotiates).

Prints one JSON line on stdout: {"connector", "node", "x", "y", "width", "height"} once the
monitor is up, or {"error"} before exiting 2. Exits 3 when mutter ends the session.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time

from media.mutter import screencast
from media.mutter.frames import GST_LAUNCH

FIRST_FRAME_TIMEOUT_S = 5.0
POLL_S = 0.5


def _say(record: dict) -> None:
    sys.stdout.write(json.dumps(record) + "\n")
    sys.stdout.flush()


def _negotiate(node_id: int, width: int, height: int) -> None:
    argv = [
        GST_LAUNCH, "-q", "pipewiresrc", f"path={node_id}", "num-buffers=1",
        "!", f"video/x-raw,width={width},height={height}", "!", "fakesink",
    ]  # fmt: skip
    proc = subprocess.Popen(
        argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    try:
        _, err = proc.communicate(timeout=FIRST_FRAME_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        raise screencast.ScreenCastError(
            f"mutter did not bring up a {width}x{height} virtual monitor in "
            f"{FIRST_FRAME_TIMEOUT_S:g} s (no frame of that size)"
        ) from None
    if proc.returncode:
        tail = err.decode(errors="replace").strip()[-300:]
        raise screencast.ScreenCastError(f"gst-launch ended {proc.returncode}: {tail}")


def _new_monitor(before: set[str], width: int, height: int) -> dict:
    for lm in screencast.logical_monitors():
        for connector in lm["connectors"]:
            if connector not in before and (lm["width"], lm["height"]) == (width, height):
                return {"connector": connector, "x": lm["x"], "y": lm["y"],
                        "width": width, "height": height}  # fmt: skip
    raise screencast.ScreenCastError(f"no new {width}x{height} monitor appeared in mutter")


def main(argv: list[str]) -> int:
    width, height = int(argv[0]), int(argv[1])
    stop = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(True))
    signal.signal(signal.SIGINT, lambda *_: stop.append(True))
    cast = None
    try:
        before = {m.connector for m in screencast.monitors()}
        cast = screencast.ScreenCast(None)
        _negotiate(cast.node_id, width, height)
        record = _new_monitor(before, width, height)
    except (screencast.ScreenCastError, OSError) as exc:
        _say({"error": str(exc)[:500]})
        if cast is not None:
            cast.close()
        return 2
    _say({**record, "node": cast.node_id})
    try:
        while not stop:
            if cast.ended():
                return 3
            time.sleep(POLL_S)
        return 0
    finally:
        cast.close()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
