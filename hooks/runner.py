"""Running operator commands (hooks and prep steps): `sh -c` in its own process group, the
event on stdin, flat `PF_EVENT_*` variables, a timeout that kills the whole group.

Plain module: no Django, so the prep runner and tests use it directly.
"""

from __future__ import annotations

import json
import logging
import os
import re
import shlex
import signal
import subprocess
import threading
import time
from dataclasses import dataclass

from common.env import without_secrets

log = logging.getLogger("hooks.runner")

SHELL = "/bin/sh"
MAX_ENV_VALUE = 8192
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
_NON_ALNUM = re.compile(r"[^A-Za-z0-9]")

# Process groups of the hook commands this process is running now (prep steps are not
# tracked: an owed `undo` is forgotten once tried, so it must not be cut off by a shutdown),
# and those `kill_running` ended.
_running: set[int] = set()
_stopped: set[int] = set()
_running_lock = threading.Lock()


@dataclass
class Result:
    outcome: str  # ok | failed | timeout | refused
    exit_code: int | None = None
    duration_ms: int = 0
    error: str = ""


def _flat(prefix: str, value, out: dict[str, str]) -> None:
    if value is None:
        return
    if isinstance(value, dict):
        for key, sub in value.items():
            _flat(f"{prefix}_{_NON_ALNUM.sub('_', str(key)).upper()}", sub, out)
    elif isinstance(value, list):
        for i, sub in enumerate(value):
            _flat(f"{prefix}_{i}", sub, out)
    elif isinstance(value, str):
        out[prefix] = _CONTROL.sub("", value)[:MAX_ENV_VALUE]
    else:
        out[prefix] = json.dumps(value)


def event_env(event: dict) -> dict[str, str]:
    """PF_EVENT_KIND, PF_EVENT_SEQ, PF_EVENT_JSON and one PF_EVENT_<PATH> per payload field."""
    out: dict[str, str] = {}
    _flat("PF_EVENT", event, out)
    out["PF_EVENT_JSON"] = json.dumps(event, separators=(",", ":"))
    return out


def base_env() -> dict[str, str]:
    """The worker's environment minus anything that looks like a host secret (the rule launched
    apps share: common/env.py)."""
    return without_secrets()


def script_refusal(command: str) -> str | None:
    """Why the absolute script a command starts with may not run, or None.

    Only an absolute path that names an existing file is checked; `~` and bare names are the
    shell's business. The file must be owned by the host user or root and not be group- or
    world-writable, or anyone else could put commands into the host's hooks.
    """
    try:
        first = shlex.split(command)[0] if command.strip() else ""
    except ValueError:
        first = command.split()[0] if command.split() else ""
    if not first.startswith("/"):
        return None
    try:
        st = os.stat(first)
    except OSError:
        return None
    if not os.path.isfile(first):
        return None
    if st.st_uid not in (os.geteuid(), 0):
        return f"{first} is not owned by the host user or root"
    if st.st_mode & 0o022:
        return f"{first} is group- or world-writable"
    return None


def kill_group(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def kill_running() -> int:
    """SIGKILL the process group of every hook command this process runs; returns how many.

    The hooks worker calls it when it is told to stop: a command (up to 600 s) must neither
    hold the host's shutdown nor outlive the host in a session of its own.
    """
    # Called from a signal handler: never block on a lock the interrupted thread may hold.
    locked = _running_lock.acquire(timeout=1.0)
    try:
        groups = list(_running)
        _stopped.update(groups)
    finally:
        if locked:
            _running_lock.release()
    for pgid in groups:
        kill_group(pgid)
    return len(groups)


def run_command(
    command: str,
    *,
    stdin: bytes = b"",
    env: dict[str, str] | None = None,
    timeout_s: float = 30,
    cwd: str | None = None,
    stoppable: bool = False,
) -> Result:
    """Run `sh -c command`; on timeout SIGKILL its whole process group. Never raises.

    `stoppable`: `kill_running` (the hooks worker stopping) may end it early.
    """
    refusal = script_refusal(command)
    if refusal:
        log.warning("hook command refused: %s", refusal)
        return Result("refused", error=refusal)
    started = time.monotonic()
    full_env = base_env()
    full_env.update(env or {})
    try:
        proc = subprocess.Popen(
            [SHELL, "-c", command],
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            env=full_env,
            cwd=cwd,
            start_new_session=True,  # own process group: the timeout kills every descendant
            close_fds=True,
        )
    except OSError as exc:
        return Result("failed", error=f"could not start: {exc.strerror}")
    if not stoppable:
        return _finish(proc, stdin, timeout_s, started)
    with _running_lock:
        _running.add(proc.pid)
    try:
        return _finish(proc, stdin, timeout_s, started)
    finally:
        with _running_lock:
            _running.discard(proc.pid)
            _stopped.discard(proc.pid)


def _finish(proc: subprocess.Popen, stdin: bytes, timeout_s: float, started: float) -> Result:
    try:
        proc.communicate(input=stdin, timeout=timeout_s)
    except subprocess.TimeoutExpired:
        kill_group(proc.pid)
        proc.wait()
        elapsed = int((time.monotonic() - started) * 1000)
        log.warning("hook command timed out after %s s; process group killed", timeout_s)
        return Result("timeout", proc.returncode, elapsed, f"timed out after {timeout_s} s")
    except BaseException:
        kill_group(proc.pid)
        proc.wait()
        raise
    elapsed = int((time.monotonic() - started) * 1000)
    code = proc.returncode
    with _running_lock:
        stopped = proc.pid in _stopped
    if stopped:
        return Result("failed", code, elapsed, "killed: the host is stopping")
    if code != 0:
        return Result("failed", code, elapsed, f"exit status {code}")
    return Result("ok", code, elapsed)


def run_hook_command(command: str, event: dict, timeout_s: float) -> Result:
    body = json.dumps(event, separators=(",", ":")).encode()
    return run_command(
        command, stdin=body, env=event_env(event), timeout_s=timeout_s, stoppable=True
    )
