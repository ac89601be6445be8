"""What the apps.json run fields mean on this host: `elevated`, `output`, `detached`,
`auto-detach` and `wait-all` (docs/library.md, "How an entry runs").

Plain functions, used at write time (`library.app_input`, the v1 custom prep steps), by the
readiness report and by the app runner of both planes (`streaming.sessions.lifecycle.AppRun`,
`games.apprun.AppProcess`):

* `elevated: true` asks to run as administrator, which is a Windows notion: refused at write
  time; a hand-edited entry that sets it is reported and runs with the host's own rights.
* `output`: the file the app's stdout and stderr are appended to (absolute path, parent
  directory writable by the host); a file that cannot be opened at launch fails the launch.
* `detached`: commands started beside the app, each in a session of its own, never tracked:
  their exit ends nothing and the session's end does not signal them.
* `auto-detach` / `wait-all`: `exit_verdict` decides whether the launched command is over.
"""

from __future__ import annotations

import logging
import os
import subprocess
import threading
from pathlib import Path

log = logging.getLogger("streaming.sessions")

ELEVATED_REASON = (
    "elevated runs an app as administrator on Windows; this Linux host does not run apps "
    "with more rights than its own"
)
# A launched command that exits with status 0 sooner than this after its start is a launcher
# that detached (the real app, or the display, is what the player uses): Sunshine's 5 s.
AUTO_DETACH_WINDOW_S = 5.0

RUNNING, DETACHED, ENDED = "running", "detached", "ended"


class OutputError(OSError):
    """The entry's `output` file cannot be opened: the launch fails with this message."""


# -- elevated --------------------------------------------------------------------------------
def _truthy(value) -> bool:
    """apps.json booleans as the catalog reads them (legacy "true" strings included)."""
    if isinstance(value, str):
        return value.strip().lower() in ("true", "1", "yes", "on")
    return bool(value) if isinstance(value, (bool, int)) else False


def elevated_fields(raw: dict) -> list[str]:
    """The fields of a raw catalog entry that ask for administrator rights (`elevated`,
    `prep-cmd[i].elevated`), for the readiness report and the launch's warning."""
    out = []
    if _truthy(raw.get("elevated")):
        out.append("elevated")
    steps = raw.get("prep-cmd")
    for i, step in enumerate(steps if isinstance(steps, list) else []):
        if isinstance(step, dict) and _truthy(step.get("elevated")):
            out.append(f"prep-cmd[{i}].elevated")
    return out


# -- output ----------------------------------------------------------------------------------
def check_output_path(path: str) -> str:
    """Write time: the `output` value, or ValueError saying why the host cannot use it."""
    if not isinstance(path, str) or not path:
        raise ValueError("output must be a non-empty path")
    if not path.isprintable():
        raise ValueError("output must be printable text (no control characters)")
    p = Path(path)
    if not p.is_absolute():
        raise ValueError("output must be an absolute path")
    if p.is_dir():
        raise ValueError("output names a directory; it must name a file")
    parent = p.parent
    if not parent.is_dir():
        raise ValueError(f"output: the directory {parent} does not exist")
    if p.exists():
        if not os.access(p, os.W_OK):
            raise ValueError(f"output: {p} is not writable by the host")
    elif not os.access(parent, os.W_OK | os.X_OK):
        raise ValueError(f"output: the directory {parent} is not writable by the host")
    return path


def open_output(path: str) -> int:
    """Launch time: a descriptor on `output`, append-only (created 0644 when missing);
    OutputError naming the file and the reason when it cannot be opened."""
    if not path.isprintable() or not os.path.isabs(path):
        raise OutputError(f"App output file {path!r} is not an absolute path")
    try:
        return os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o644)
    except OSError as exc:
        raise OutputError(f"App output file {path} cannot be opened: {exc.strerror}") from None


# -- starting commands -----------------------------------------------------------------------
def shell(cmd: str, env: dict, working_dir: str = "", output_fd: int | None = None):
    """`/bin/sh -c cmd` in a session and process group of its own (so its whole group can be
    signalled, or left alone), stdout and stderr to the entry's `output` file or nowhere."""
    sink = output_fd if output_fd is not None else subprocess.DEVNULL
    return subprocess.Popen(
        ["/bin/sh", "-c", cmd],
        env=env,
        cwd=working_dir or None,
        stdin=subprocess.DEVNULL,
        stdout=sink,
        stderr=sink,
        start_new_session=True,
    )


# -- detached --------------------------------------------------------------------------------
def start_detached(commands: list[str], env: dict, working_dir: str = "",
                   output_fd: int | None = None) -> list[int]:  # fmt: skip
    """Start each command with `/bin/sh -c` in a session and process group of its own and
    forget it: a thread reaps it when it ends, nothing signals it. A command that cannot
    start is logged and skipped (the app itself still launches). Returns the pids.
    They carry no HOST_INSTANCE run mark: the host's sentinel leaves them running when the
    host goes, as the session's end does (supervisor/sentinel.py)."""
    env = {k: v for k, v in env.items() if k != "HOST_INSTANCE"}
    pids = []
    for cmd in commands:
        if not isinstance(cmd, str) or not cmd.strip():
            continue
        try:
            proc = shell(cmd, env, working_dir, output_fd)
        except OSError as exc:
            log.warning("detached command not started (%s): %s", exc.strerror, cmd)
            continue
        threading.Thread(target=proc.wait, name="detached-reap", daemon=True).start()
        log.info("detached command started: pid %d (not tracked)", proc.pid)
        pids.append(proc.pid)
    return pids


# -- auto-detach and wait-all ----------------------------------------------------------------
def exit_verdict(status: int | None, ran_s: float, group_alive: bool, *, auto_detach: bool,
                 wait_all: bool, window_s: float = AUTO_DETACH_WINDOW_S) -> str:  # fmt: skip
    """Whether the launched command is over, from its exit `status` (None: still running),
    how long it ran, and whether anything of its process group is left.

    RUNNING: it (or, with `wait_all`, any process of its group) still runs. DETACHED: with
    `auto_detach`, it exited with status 0 within `window_s`, so it was a launcher: the session
    goes on with what it started or with the display. ENDED: the app is over."""
    if status is None:
        return RUNNING
    if auto_detach and status == 0 and ran_s < window_s:
        return DETACHED
    if wait_all and group_alive:
        return RUNNING
    return ENDED
