"""How other processes talk to the plugin runner (`plugins.runner`, a supervisor child).

Contract (the store codes against these names only):
- `request_rescan()`: ask the runner to re-read the installed plugins (after an install or an
  uninstall). Returns at once; the runner acts within about a second. Works whether or not the
  runner is running (a runner started later scans anyway).
- `status()` -> `{plugin_id: {"pid": int | None, "running": bool, "restarts": int,
  "last_exit": int | None, "started_at": float | None, "log": [str, ...]}}`: what the runner
  last wrote (at most ~1 s old); `{}` when the runner is off or has never run. Readable from any
  process of the host, no Redis needed.
- `runtime_enabled()` / `set_runtime_enabled(bool)`: the persisted on/off switch of the runner
  (`GET/POST /store/runtime`), default off.

All of it is files under `<state>/plugins/` written atomically, so a reader never sees half of
one and the runner needs no broker to be told anything.

Nothing here imports Django.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

from hostmgmt.lib import statedir
from hostmgmt.lib.files import atomic_write

RESCAN_FILE = "runner-rescan"
STATUS_FILE = "runner-status.json"
RUNTIME_FILE = "runtime.json"
# A status file older than this means the runner is gone (it rewrites it every tick).
STATUS_STALE_S = 10.0


def control_dir() -> Path:
    path = statedir.state_path("plugins")
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    return path


def request_rescan() -> None:
    """Ask the runner to rescan the installed plugins (it watches this file's content)."""
    atomic_write(control_dir() / RESCAN_FILE, f"{time.time_ns()}\n", durable=False)


def rescan_marker() -> str:
    """The runner's side: the current request marker ('' when none was ever made)."""
    try:
        return (control_dir() / RESCAN_FILE).read_text(encoding="utf-8").strip()
    except FileNotFoundError:
        return ""


def status() -> dict[str, dict]:
    """The runner's last view of its plugins; `{}` when it is not running."""
    path = control_dir() / STATUS_FILE
    try:
        if time.time() - path.stat().st_mtime > STATUS_STALE_S:
            return {}
        data = json.loads(path.read_text(encoding="utf-8"))
    except (FileNotFoundError, ValueError):
        return {}
    plugins = data.get("plugins") if isinstance(data, dict) else None
    return plugins if isinstance(plugins, dict) else {}


def runner_alive() -> bool:
    """Whether a runner has written its status within `STATUS_STALE_S`."""
    try:
        age = time.time() - (control_dir() / STATUS_FILE).stat().st_mtime
    except FileNotFoundError:
        return False
    return age <= STATUS_STALE_S


def write_status(plugins: dict[str, dict]) -> None:
    """The runner's side: publish its view (not fsynced: rewritten every tick)."""
    body = json.dumps({"pid": os.getpid(), "written_at": time.time(), "plugins": plugins})
    atomic_write(control_dir() / STATUS_FILE, body, mode=0o600, durable=False)


def clear_status() -> None:
    try:
        (control_dir() / STATUS_FILE).unlink()
    except FileNotFoundError:
        pass


def runtime_enabled() -> bool:
    try:
        data = json.loads((control_dir() / RUNTIME_FILE).read_text(encoding="utf-8"))
    except (FileNotFoundError, ValueError):
        return False
    return isinstance(data, dict) and data.get("enabled") is True


def set_runtime_enabled(enabled: bool) -> bool:
    """Persist the switch; True when it changed."""
    changed = runtime_enabled() != bool(enabled)
    atomic_write(control_dir() / RUNTIME_FILE, json.dumps({"enabled": bool(enabled)}) + "\n")
    return changed
