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
- `runner_state()` -> `{"confined": bool | None, "confinement": str, "refused": str | None}`:
  whether the runner confines its plugins (and why not), and why it runs none at all.
- `ui_port_error(plugin_id, port)`: None when the LISTEN socket on 127.0.0.1:`port` belongs to
  that plugin's own process tree (the runner's pid for it and its descendants), else why not.
  The registration API and the console's UI proxy both ask it, so a registration cannot point
  the console at another local service.

All of it is files under `<state>/plugins/` written atomically, so a reader never sees half of
one and the runner needs no broker to be told anything.

Nothing here imports Django.
"""

from __future__ import annotations

import ipaddress
import json
import os
import time
from pathlib import Path

from common import netranges, statedir
from common.files import atomic_write

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


def runner_state() -> dict:
    """The runner's confinement and refusal, as last written; `{}` when it is not running."""
    path = control_dir() / STATUS_FILE
    try:
        if time.time() - path.stat().st_mtime > STATUS_STALE_S:
            return {}
        data = json.loads(path.read_text(encoding="utf-8"))
    except (FileNotFoundError, ValueError):
        return {}
    if not isinstance(data, dict):
        return {}
    return {k: data.get(k) for k in ("confined", "confinement", "refused")}


def write_status(
    plugins: dict[str, dict],
    *,
    confined: bool | None = None,
    confinement: str = "",
    refused: str | None = None,
) -> None:
    """The runner's side: publish its view (not fsynced: rewritten every tick)."""
    body = json.dumps(
        {
            "pid": os.getpid(),
            "written_at": time.time(),
            "confined": confined,
            "confinement": confinement,
            "refused": refused,
            "plugins": plugins,
        }
    )
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


# -- who owns a loopback port -------------------------------------------------------------------
_LISTEN = "0A"  # TCP_LISTEN in /proc/net/tcp*


def _hex_ip(text: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address:
    """An address of /proc/net/tcp(6): 32-bit words in host (little-endian) byte order."""
    raw = bytes.fromhex(text)
    words = b"".join(raw[i : i + 4][::-1] for i in range(0, len(raw), 4))
    return ipaddress.ip_address(words)


def listening_inodes(port: int) -> set[int]:
    """Inodes of the LISTEN sockets that a connection to 127.0.0.1:`port` could reach (bound to
    a loopback or the wildcard address, IPv4 or IPv6)."""
    found = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text(encoding="ascii").splitlines()[1:]
        except FileNotFoundError:
            continue
        for line in lines:
            cols = line.split()
            if len(cols) < 10 or cols[3] != _LISTEN:
                continue
            addr, _, hex_port = cols[1].partition(":")
            if int(hex_port, 16) != port:
                continue
            ip = _hex_ip(addr)
            if netranges.is_loopback(ip) or ip.is_unspecified:
                found.add(int(cols[9]))
    return found


def process_tree(root: int) -> set[int]:
    """`root` and every descendant (host pids: a sandbox's new pid namespace is still visible
    from here, under the bubblewrap process the runner started)."""
    children: dict[int, list[int]] = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            stat = Path(entry.path, "stat").read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        # "pid (comm) state ppid ...": comm may hold spaces and parentheses
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        children.setdefault(ppid, []).append(int(entry.name))
    tree, todo = set(), [root]
    while todo:
        pid = todo.pop()
        if pid not in tree:
            tree.add(pid)
            todo.extend(children.get(pid, []))
    return tree


def socket_inodes(pids: set[int]) -> set[int]:
    """Socket inodes held open by `pids`; PermissionError when one's fds cannot be read."""
    inodes = set()
    for pid in pids:
        try:
            fds = os.listdir(f"/proc/{pid}/fd")
        except FileNotFoundError:
            continue  # gone meanwhile
        for fd in fds:
            try:
                target = os.readlink(f"/proc/{pid}/fd/{fd}")
            except FileNotFoundError:
                continue
            if target.startswith("socket:["):
                inodes.add(int(target[8:-1]))
    return inodes


def ui_port_error(plugin_id: str, port: int) -> str | None:
    """None when 127.0.0.1:`port` is listened on by `plugin_id`'s own processes only; otherwise
    a sentence saying why the port is not the plugin's."""
    run = status().get(plugin_id) or {}
    pid = run.get("pid")
    if not run.get("running") or not isinstance(pid, int) or pid <= 0:
        return f"plugin {plugin_id} is not running under the host's plugin runner"
    listening = listening_inodes(port)
    if not listening:
        return f"nothing listens on 127.0.0.1:{port}"
    try:
        owned = socket_inodes(process_tree(pid))
    except PermissionError:
        return f"the processes of plugin {plugin_id} cannot be inspected"
    if not listening <= owned:
        return f"127.0.0.1:{port} is not listened on by plugin {plugin_id}'s own process"
    return None
