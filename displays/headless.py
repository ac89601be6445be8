"""The host's one headless compositor (`headless_mode = true`), shared by its processes.

Compat sessions run in a Celery worker and native ones in a daphne child, so the compositor is
not an object of one process: `ensure()` starts it on demand under a file lock in the state
directory and records it there (`headless-compositor.json`: pid, sockets, process token);
every process attaches to the recorded one while it is alive. Each display of the display
machine is one output of it (`create_output` / `retire_output`, under the same lock).

Processes carry `HOST_COMPOSITOR_OWNER=<owner>:<id>` with an owner derived from the state
directory, so `sweep()` at host start kills what a crashed host left and `stop()` at host
stop leaves no sway, Xwayland or app behind.

sway refuses root. A host running as root (a headless box, CI) runs the compositor as the
user named by `HOST_COMPOSITOR_USER` (a dedicated user; `nobody` works but is shared with
other services); without it a session start fails with ROOT_REFUSAL. Every app then runs as
that user, so what that user writes never steers root (see displays/sway.py).
What runs on the compositor's desktop: its background colour
(`HOST_COMPOSITOR_BACKGROUND`, #RRGGBB) and the sway config lines of the file named by
`HOST_COMPOSITOR_CONFIG` (operator-owned: e.g. `exec waybar` or a wallpaper).
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import logging
import os
import pwd
import shutil

from common.statedir import state_dir
from displays import gnome_monitors
from displays import sway as swaymod
from displays.sway import CompositorError, SwayCompositor
from hostconfig import store

log = logging.getLogger(__name__)

RECORD = "headless-compositor.json"
LOCK = "headless-compositor.lock"
USER_ENV = "HOST_COMPOSITOR_USER"
BACKGROUND_ENV = "HOST_COMPOSITOR_BACKGROUND"
CONFIG_ENV = "HOST_COMPOSITOR_CONFIG"
DEFAULT_BACKGROUND = "#285577"  # sway's own focus blue: a private desktop is never black
BACKENDS = ("sway", "mutter")  # compositor_backend values this build can run


def owner() -> str:
    """The owner part of the process token: one per state directory (no ':' allowed)."""
    return "host-" + hashlib.sha256(str(state_dir()).encode()).hexdigest()[:16]


def backend(gnome_why: str | None = None) -> tuple[str | None, str]:
    """(the backend this host would give each display, or None, why). `gnome_why` is why the
    user's GNOME (mutter's ScreenCast and RemoteDesktop on the session bus) cannot serve, ""
    when it can (displays/capture.py probes it): there each display is a virtual monitor of
    the person's own desktop (displays/gnome_monitors.py), else an output of the host's sway."""
    wanted = store.get("compositor_backend") or "auto"
    if wanted in ("auto", "mutter"):
        if gnome_why == "":
            return "mutter", f"compositor_backend = {wanted}: the desktop is GNOME (mutter)"
        if wanted == "mutter":
            return None, f"compositor_backend = mutter: {gnome_why or 'no GNOME session'}"
    if wanted in ("auto", "sway"):
        if swaymod.available():
            return "sway", f"compositor_backend = {wanted}: sway is installed"
        return None, f"compositor_backend = {wanted}: sway is not installed (Debian package sway)"
    return None, f"compositor_backend = {wanted} is not implemented in this build"


def run_as() -> tuple[int, int] | None:
    """The user sway runs as: None (the host's own) unless the host is root; then the user
    HOST_COMPOSITOR_USER names. CompositorError(ROOT_REFUSAL) when root without it."""
    if os.geteuid() != 0:
        return None
    name = (os.environ.get(USER_ENV) or "").strip()
    if not name:
        raise CompositorError(
            f"{swaymod.ROOT_REFUSAL} (or set {USER_ENV} to the user the compositor runs as)"
        )
    try:
        pw = pwd.getpwnam(name)
    except KeyError:
        raise CompositorError(f"{USER_ENV}={name[:32]}: no such user") from None
    if pw.pw_uid == 0:
        raise CompositorError(f"{USER_ENV}={name[:32]}: {swaymod.ROOT_REFUSAL}")
    return pw.pw_uid, pw.pw_gid


@contextlib.contextmanager
def _locked():
    path = state_dir() / LOCK
    with open(path, "a+") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def _read() -> dict | None:
    try:
        return json.loads((state_dir() / RECORD).read_text())
    except (OSError, ValueError):
        return None


def _write(record: dict | None) -> None:
    path = state_dir() / RECORD
    if record is None:
        path.unlink(missing_ok=True)
        return
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(record))
    os.chmod(tmp, 0o600)
    tmp.replace(path)


def _attach_recorded() -> SwayCompositor | None:
    record = _read()
    if not record:
        return None
    try:
        return SwayCompositor.attach(record)
    except (CompositorError, KeyError, TypeError, ValueError) as exc:
        log.warning("headless compositor gone (%s); cleaning up", exc)
        swaymod.kill_owned(str(record.get("token") or "-"))
        _remove_dirs(record)
        _write(None)
        return None


def _remove_dirs(record: dict) -> None:
    """The recorded compositor's directory (`base_dir`, holding the user's runtime directory;
    an older record names only `runtime_dir`), when it is one a compositor made."""
    for key in ("base_dir", "runtime_dir"):
        d = record.get(key)
        if isinstance(d, str) and os.path.basename(d).startswith("host-sway-"):
            shutil.rmtree(d, ignore_errors=True)


def current() -> SwayCompositor | None:
    """The running compositor, attached (`detach()` it after use), or None."""
    with _locked():
        return _attach_recorded()


def _extra_config() -> str:
    path = (os.environ.get(CONFIG_ENV) or "").strip()
    if not path:
        return ""
    try:
        with open(path) as f:
            return f.read()[:65536]
    except OSError as exc:
        raise CompositorError(f"{CONFIG_ENV}: cannot read {path}: {exc.strerror}") from None


def ensure() -> SwayCompositor:
    """The running compositor, started now when there is none; CompositorError why not."""
    name, why = backend()
    if name is None:
        raise CompositorError(why)
    with _locked():
        comp = _attach_recorded()
        if comp is not None:
            return comp
        comp = SwayCompositor(
            run_as=run_as(),
            background=os.environ.get(BACKGROUND_ENV) or DEFAULT_BACKGROUND,
            extra_config=_extra_config(),
            owner=owner(),
            env={"HOST_DISPLAY_OWNER": str(state_dir())},
        )
        comp.start()
        try:
            # The output sway starts with is parked: sessions get outputs at their own modes.
            for o in comp.outputs():
                comp.retire_output(o["name"])
            _write(comp.record())
        except BaseException:
            comp.stop()
            raise
        log.info("headless sway started (pid %s) at %s", comp.pid, comp.wayland_socket)
        return comp


def create_output(width: int, height: int, refresh: int, x: int, y: int,
                  in_use: set[str], focus: bool = False) -> tuple[SwayCompositor, str]:  # fmt: skip
    """A new output at the mode and position; (the compositor, the output's name). `focus`
    makes it the focused output (topology `primary`): windows that open without a place of
    their own open there."""
    comp = ensure()
    try:
        with _locked():
            comp.refresh_retired(in_use)
            name = comp.create_output(width, height, swaymod.repaint_rate(refresh), x=x, y=y)
            if focus:
                comp.focus_output(name)
            return comp, name
    except BaseException:
        comp.detach()
        raise


def retire_output(name: str) -> None:
    """Take a session's output away; nothing to do when the compositor is gone."""
    with _locked():
        comp = _attach_recorded()
        if comp is None:
            return
        try:
            comp.retire_output(name)
        except CompositorError as exc:
            log.warning("output %s not retired: %s", name, exc)
        finally:
            comp.detach()


def output_alive(name: str) -> bool:
    comp = current()
    if comp is None:
        return False
    try:
        out = comp.output(name)
    except CompositorError:
        return False
    finally:
        comp.detach()
    return bool(out.get("active")) and out["rect"]["y"] < 4320 + swaymod.PARK_GAP


def stop() -> bool:
    """Stop the compositor and everything in it (host stop); True when one ran."""
    with _locked():
        comp = _attach_recorded()
        _write(None)
    if comp is not None:
        comp.stop()
    swaymod.kill_owned(owner() + ":", prefix=True)
    return comp is not None


def sweep() -> list[int]:
    """Host start: kill whatever a crashed host left (its record is stale by definition)."""
    with _locked():
        record = _read()
        _write(None)
    pids = swaymod.kill_owned(owner() + ":", prefix=True)
    _remove_dirs(record or {})
    return pids


def status(gnome_why: str | None = None) -> dict:
    """For preflight and listings: the backend, whether a compositor runs, its outputs.
    On GNOME (`gnome_why` "", see `backend`) nothing of the host's runs: it counts the
    virtual monitors it keeps there."""
    name, why = backend(gnome_why)
    out = {"backend": name, "reason": why, "running": False, "outputs": []}
    if name == "mutter":
        out["monitors_kept"] = len(gnome_monitors.owned_pids())
        return out
    try:
        user = run_as()
        out["user"] = pwd.getpwuid(user[0]).pw_name if user else None
    except CompositorError as exc:
        out["error"] = str(exc)
    comp = current()
    if comp is not None:
        out.update(running=True, pid=comp.pid, wayland_display=comp.wayland_socket)
        with contextlib.suppress(CompositorError):
            out["outputs"] = [
                {"name": o["name"], "mode": o.get("current_mode"), "rect": o["rect"]}
                for o in comp.outputs()
                if o["name"] not in comp._retired
            ]
        comp.detach()
    return out
