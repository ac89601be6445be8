"""The virtual display state machine.

    acquire ──▶ active ──last session leaves──▶ lingering (deadline) ──deadline──▶ torn down
                  ▲  │                          │      │
                  │  └──keep_alive forever──▶ pinned   └──/display/release──▶ torn down
                  └──────── re-acquire (same identity and mode) ──┘

`keep_alive: off` (or a deliberate stop under `duration`) tears down at once. Release never
touches an active display. The operator can pin one display (`pin`): a kept one at once, an
active one when its last session leaves (`pin_on_leave`); `unpin` hands it back to the
current policy's keep-alive. Rows live in the database (shared by daphne, workers and the
supervisor); the supervisor's tick expires deadlines, and its start/stop hooks make countdowns
survive a restart while leaving no X server behind (`reaper`).

Headless displays (`headless_mode`) are outputs of the host's one headless sway
(displays/headless.py), created at the client's mode at the layout's position and
retired on teardown; on a GNOME session they are virtual monitors of the person's desktop
(displays/gnome_monitors.py: one keeper process each, placed by mutter, always one desktop
with the others). The same states act on them as on Xvfb servers.

Attached displays (capture `x11` / `wlr` / `gnome` / `kwin` / `portal`: the operator's own X
server, wlroots output, GNOME monitor, KDE output or the screen picked in the desktop portal's
dialog, see displays/capture.py) are recorded with `owned = False`: every session shares the
one row, it is never started, kept, lingered or torn down by the host; when its last session
leaves the row goes and the server is left exactly as it was.
"""

from __future__ import annotations

import datetime as dt
import logging
import os
import re

from django.db import transaction
from django.utils import timezone

from common import dbversion
from common.errors import DomainError
from displays import capture, gnome_monitors, headless, xvfb
from displays import policy as policies
from displays.models import VirtualDisplay
from displays.sway import PARK_GAP, CompositorError
from hooks import events
from hostconfig import store

log = logging.getLogger(__name__)

MODE_RE = re.compile(r"^(\d{2,5})x(\d{2,5})(?:@(\d{1,3}))?$")
MIN_W, MAX_W, MIN_H, MAX_H, MAX_HZ = 320, 7680, 200, 4320, 240


class DisplayError(DomainError):
    """A request the machine refuses; `status` is the HTTP status an API would answer."""

    def __init__(self, status: int, message: str):
        super().__init__(message, status=status)


def parse_mode(mode: str) -> tuple[int, int, int]:
    m = MODE_RE.match(str(mode).strip())
    if not m:
        raise DisplayError(400, "mode must be WIDTHxHEIGHT@HZ")
    w, h, hz = int(m.group(1)), int(m.group(2)), int(m.group(3) or 60)
    if not (MIN_W <= w <= MAX_W and MIN_H <= h <= MAX_H and 1 <= hz <= MAX_HZ):
        raise DisplayError(400, f"mode must be {MIN_W}-{MAX_W} x {MIN_H}-{MAX_H} @ 1-{MAX_HZ}")
    return w, h, hz


def _emit(kind: str, payload: dict) -> None:
    events.emit(kind, payload)


def _identity_key(identity: str, client: str, mode: str) -> str:
    if identity == "shared":
        return "shared"
    if identity == "per-client-mode":
        return f"client:{client}|{mode}"
    return f"client:{client}"


def _lowest_free(used: set[int], start: int = 0) -> int:
    n = start
    while n in used:
        n += 1
    return n


def _teardown(display: VirtualDisplay) -> None:
    if display.owned and display.backend == MUTTER:
        gnome_monitors.stop(display.pid)  # mutter removes the monitor with its keeper
    elif display.owned and display.backend == SWAY:
        headless.retire_output(display.output)  # the compositor stays for the others
    elif display.owned:  # never signal a server the host did not start
        xvfb.stop(display.pid)
    display.delete()


SWAY = "sway"
MUTTER = gnome_monitors.BACKEND


def _alive(display: VirtualDisplay) -> bool:
    """The display's server (Xvfb) or output (headless sway) still exists."""
    if display.backend == SWAY:
        return bool(display.output) and headless.output_alive(display.output)
    if display.backend == MUTTER:
        return gnome_monitors.alive(display.pid)
    return xvfb.alive(display.pid)


def resolve_topology(wanted: str, backend: str) -> str:
    """What the policy's topology means on this backend. Xvfb displays are separate X servers,
    so each is exclusive whatever was asked. The headless compositor is the host's own (not
    the operator's desktop), so `auto` is exclusive there; `extend` and `primary` join the
    other live outputs into one desktop. A GNOME virtual monitor is always part of the
    person's one desktop: `auto` is `extend` there, and `acquire` refuses the others."""
    if backend == MUTTER:
        return "extend" if wanted in ("auto", "extend") else wanted
    if backend != SWAY:
        return "exclusive"
    return "exclusive" if wanted == "auto" else wanted


def _place(display: VirtualDisplay, axes: dict) -> None:
    """Layout inside group 0: manual positions per identity slot (the operator's choice, kept
    whatever the topology), else a left-to-right row. In that row an `extend`/`primary` output
    touches its neighbour (the pointer and windows cross over); an `exclusive` one stands
    `sway.PARK_GAP` apart, so nothing crosses into or out of it (Xvfb displays are separate
    servers: their row is only the reported layout)."""
    others = list(
        VirtualDisplay.objects.exclude(pk=display.pk).filter(group=display.group, owned=True)
    )
    display.display_index = len(others)
    positions = axes["layout"].get("positions") or {}
    key = str(display.identity_slot if display.identity_slot is not None else 0)
    if axes["layout"]["mode"] == "manual" and key in positions:
        display.x, display.y = positions[key]["x"], positions[key]["y"]
        return
    display.y = 0
    if not others:
        display.x = 0
        return
    neighbour = max(others, key=lambda o: o.x + o.width)
    display.x = neighbour.x + neighbour.width
    if display.backend == SWAY and "exclusive" in (display.topology, neighbour.topology):
        display.x += PARK_GAP


def _headless_defaults(mode: str) -> str:
    """headless_width / headless_height / headless_refresh fill what the request leaves out
    (no mode at all, or no refresh); a client's own mode always wins."""
    mode = str(mode or "").strip()
    if not mode:
        w, h = store.get("headless_width") or 0, store.get("headless_height") or 0
        if not (w and h):
            raise DisplayError(400, "no mode asked and headless_width/height are not set")
        mode = f"{w}x{h}"
    if "@" not in mode:
        mode = f"{mode}@{store.get('headless_refresh') or 60}"
    return mode


def acquire(client: str, mode: str, plane: str = "compat") -> dict:
    """A display for a new session of `client` at `mode`, per the capture backend and the
    policy in force now (both planes: `plane` is kept for the callers' records). DisplayError
    503 when the configured backend cannot be used."""
    client = (client or "").strip()[:128]
    try:
        selection = capture.require()
    except capture.CaptureError as exc:
        log.warning("no display for %s: %s", client or "a client", exc.message)
        raise DisplayError(exc.status, exc.message) from None
    if selection.backend == "headless":
        mode = _headless_defaults(mode)
    width, height, refresh = parse_mode(mode)
    mode = f"{width}x{height}@{refresh}"
    if selection.backend in ("x11", "wlr", "gnome", "kwin", "portal"):
        return _attach(client, refresh, selection, (width, height))
    if selection.backend == "headless":
        return _acquire_private(client, mode, width, height, refresh, selection.headless)
    return _acquire_private(client, mode, width, height, refresh, xvfb.BACKEND)


def _attach(client: str, refresh: int, selection, size: tuple[int, int]) -> dict:
    """Join (or start recording) the operator's X display or wlroots output; nothing is
    started. A portal display's screen is picked in the portal's dialog, so its size is
    known only to the stream: the row records the client's `size` (not updated from the
    stream)."""
    region = selection.region or {"left": 0, "top": 0, "width": size[0], "height": size[1]}
    if selection.backend == "portal":
        ident = "attached:portal|" + _bus_key()
    elif selection.backend == "wlr":
        ident = f"attached:{selection.wayland_socket}|{selection.output}"
    elif selection.backend == "gnome":
        ident = f"attached:gnome|{selection.output}"
    elif selection.backend == "kwin":
        ident = f"attached:kwin|{selection.output}"
    else:
        ident = f"attached:{selection.x_display}"
    with transaction.atomic():
        display = (
            VirtualDisplay.objects.select_for_update()
            .filter(owned=False, identity_key=ident)
            .first()
        )
        created = display is None
        if created:
            slots = set(VirtualDisplay.objects.values_list("slot", flat=True))
            display = VirtualDisplay(
                slot=_lowest_free(slots),
                backend=selection.backend,
                owned=False,
                client=client,
                identity_key=ident,
                identity_slot=None,
                topology="exclusive",
                policy={"keep_alive": {"mode": "off"}},
                pid=None,
                x_display=selection.x_display,
                output=selection.output,
                wayland=selection.wayland_socket,
                sessions=0,
                refresh=refresh,
            )
        # The captured monitor, as found now (the operator may have changed the desktop).
        display.x, display.y = region["left"], region["top"]
        display.width, display.height = region["width"], region["height"]
        display.state, display.deadline = VirtualDisplay.ACTIVE, None
        display.sessions += 1
        display.save()
    if created:
        _emit(
            "display.created",
            {"backend": display.backend, "mode": display.mode, "owned": False,
             "x_display": display.x_display, "output": display.output or None},
        )  # fmt: skip
    return info(display)


def _acquire_private(
    client: str, mode: str, width: int, height: int, refresh: int, backend: str
) -> dict:
    """A private display: an Xvfb server, or (headless) an output of the host's headless
    compositor or a virtual monitor of the user's GNOME. All go through the same policy:
    identity, mode conflicts, max_displays."""
    stored, _ = policies.load()
    axes = policies.effective(stored)
    ident = _identity_key(axes["identity"], client, mode)
    with transaction.atomic():
        same = list(VirtualDisplay.objects.select_for_update().filter(identity_key=ident))
        same = [d for d in same if d.backend == backend] + [d for d in same if d.backend != backend]
        for display in same:
            if display.backend != backend:
                _teardown(display)  # headless_mode was switched: the old kind goes
                continue
            if display.mode == mode and _alive(display):
                # Re-acquire (kept) or join (active, same mode): the countdown is cancelled.
                display.state, display.deadline = VirtualDisplay.ACTIVE, None
                display.sessions += 1
                display.save()
                return info(display)
        for display in same:
            if display.state != VirtualDisplay.ACTIVE or not _alive(display):
                _teardown(display)  # kept at another mode, or its server died: start afresh
                continue
            conflict = axes["mode_conflict"]
            if conflict == "reject":
                raise DisplayError(409, f"a display for this client is live at {display.mode}")
            if conflict == "join":
                display.sessions += 1
                display.save()
                return info(display)
            if conflict == "steal":
                _teardown(display)
        live = list(
            VirtualDisplay.objects.select_for_update().filter(owned=True).order_by("updated_at")
        )
        kept = [d for d in live if d.state != VirtualDisplay.ACTIVE]
        while len(live) >= axes["max_displays"] and kept:
            oldest = kept.pop(0)
            _teardown(oldest)
            live.remove(oldest)
        if len(live) >= axes["max_displays"]:
            raise DisplayError(409, f"max_displays ({axes['max_displays']}) are in use")
        slots = set(VirtualDisplay.objects.values_list("slot", flat=True))
        id_slots = set(
            VirtualDisplay.objects.exclude(identity_slot=None).values_list(
                "identity_slot", flat=True
            )
        )
        topology = resolve_topology(axes["topology"], backend)
        if backend == MUTTER and topology != "extend":
            raise DisplayError(409, f"topology = {topology} cannot be kept on GNOME: its "
                                    "virtual monitors join the person's one desktop (set "
                                    "topology to auto or extend)")  # fmt: skip
        display = VirtualDisplay(
            slot=_lowest_free(slots),
            width=width,
            height=height,
            refresh=refresh,
            state=VirtualDisplay.ACTIVE,
            sessions=1,
            client=client,
            identity_key=ident,
            identity_slot=None if ident == "shared" else _lowest_free(id_slots),
            topology=topology,
            policy=axes,
            backend=backend,
        )
        _place(display, axes)
        if backend == MUTTER:
            _start_monitor(display)
        elif backend == SWAY:
            _start_output(display)
        else:
            try:
                display.pid, display.x_display = xvfb.start(width, height)
            except xvfb.BackendError as exc:
                raise DisplayError(503, str(exc)) from None
        try:
            display.save()
        except Exception:
            _teardown_server(display)
            raise
        event = {"backend": display.backend, "mode": display.mode}
        if backend != xvfb.BACKEND:
            event["output"] = display.output
        _emit("display.created", event)
        return info(display)


def _start_output(display: VirtualDisplay) -> None:
    """An output of the headless compositor at the display's mode and `_place` position."""
    in_use = set(VirtualDisplay.objects.filter(backend=SWAY).values_list("output", flat=True))
    try:
        comp, name = headless.create_output(display.width, display.height, display.refresh,
                                            display.x, display.y, in_use,
                                            focus=display.topology == "primary")  # fmt: skip
    except CompositorError as exc:
        raise DisplayError(503, f"headless compositor: {exc}") from None
    try:
        display.output, display.wayland, display.pid = name, comp.wayland_socket, comp.pid
        display.x_display = comp.xwayland_display(timeout=0) or ""
    finally:
        comp.detach()


def _start_monitor(display: VirtualDisplay) -> None:
    """A virtual monitor of the user's GNOME at the display's mode, where mutter puts it."""
    try:
        got = gnome_monitors.start(display.width, display.height, display.refresh)
    except gnome_monitors.MonitorError as exc:
        raise DisplayError(503, f"GNOME virtual monitor: {exc}") from None
    display.pid, display.output = got["pid"], got["connector"]
    display.x, display.y = got["x"], got["y"]


def _teardown_server(display: VirtualDisplay) -> None:
    if display.backend == MUTTER:
        gnome_monitors.stop(display.pid)
    elif display.backend == SWAY:
        headless.retire_output(display.output)
    else:
        xvfb.stop(display.pid)


def disconnect(slot: int, deliberate: bool = False) -> dict | None:
    """A session leaves the display at `slot`; returns its new info, or None when torn down."""
    with transaction.atomic():
        display = VirtualDisplay.objects.select_for_update().filter(slot=slot).first()
        if display is None or display.state != VirtualDisplay.ACTIVE:
            raise DisplayError(404, f"no active display in slot {slot}")
        display.sessions = max(0, display.sessions - 1)
        if display.sessions > 0:
            display.save()
            return info(display)
        if not display.owned:
            display.delete()  # the operator's server stays as it is: nothing to keep alive
            return None
        keep = keep_alive(display)
        if keep["mode"] == "forever":
            display.state = VirtualDisplay.PINNED
        elif keep["mode"] == "duration" and not deliberate:
            display.state = VirtualDisplay.LINGERING
            display.deadline = timezone.now() + dt.timedelta(seconds=keep["seconds"])
        else:
            _teardown(display)
            return None
        display.save()
        return info(display)


def keep_alive(display: VirtualDisplay) -> dict:
    """What happens when the display's last session leaves: pinned by the operator, else the
    keep-alive of the policy it was opened under."""
    if display.pin_on_leave:
        return {"mode": "forever"}
    return display.policy.get("keep_alive") or {"mode": "off"}


def _owned_display(slot: int) -> VirtualDisplay:
    display = VirtualDisplay.objects.select_for_update().filter(slot=slot).first()
    if display is None:
        raise DisplayError(404, f"no display in slot {slot}")
    if not display.owned:
        raise DisplayError(409, "an attached display is the operator's own: the host never "
                                "keeps or tears it down")  # fmt: skip
    return display


def pin(slot: int) -> dict:
    """Keep the display until released: a lingering one is pinned now (its countdown stops),
    an active one when its last session leaves, and again after each later session. Pinning
    a pinned display changes nothing."""
    with transaction.atomic():
        display = _owned_display(slot)
        display.pin_on_leave = True  # also after a re-acquire, until unpinned or released
        if display.state != VirtualDisplay.ACTIVE:
            display.state, display.deadline = VirtualDisplay.PINNED, None
        display.save()
        return info(display)


def unpin(slot: int) -> dict | None:
    """Back to the keep-alive policy in force now: a pinned display starts its countdown, or
    is torn down under `off` (None); an active one loses its pin-on-leave. Under `forever`
    a pinned display stays pinned by the policy itself: DisplayError 409 (release it)."""
    stored, _ = policies.load()
    keep = policies.effective(stored)["keep_alive"]
    with transaction.atomic():
        display = _owned_display(slot)
        display.pin_on_leave = False
        if display.state == VirtualDisplay.PINNED:
            if keep["mode"] == "forever":
                raise DisplayError(409, "the keep-alive policy is `forever`: this display "
                                        "stays pinned; release it instead")  # fmt: skip
            if keep["mode"] == "off":
                _teardown(display)
                display = None
            else:
                display.state = VirtualDisplay.LINGERING
                display.deadline = timezone.now() + dt.timedelta(seconds=keep["seconds"])
        if display is not None:
            display.save()
            return info(display)
    _emit("display.released", {"count": 1})
    return None


def release(slot: int | None = None) -> int:
    """Tear down kept (lingering or pinned) displays, one slot or all; never an active one."""
    with transaction.atomic():
        kept = VirtualDisplay.objects.select_for_update().exclude(state=VirtualDisplay.ACTIVE)
        if slot is not None:
            kept = kept.filter(slot=slot)
        displays = list(kept)
        for display in displays:
            _teardown(display)
    if displays:
        _emit("display.released", {"count": len(displays)})
    return len(displays)


def expire_due(now: dt.datetime | None = None) -> int:
    """Tear down every lingering display whose countdown has ended."""
    now = now or timezone.now()
    if not VirtualDisplay.objects.filter(
        state=VirtualDisplay.LINGERING, deadline__lte=now
    ).exists():
        return 0
    with transaction.atomic():
        due = list(
            VirtualDisplay.objects.select_for_update().filter(
                state=VirtualDisplay.LINGERING, deadline__lte=now
            )
        )
        for display in due:
            log.info("display slot %d lingered out; tearing down", display.slot)
            _teardown(display)
    return len(due)


def _bus_key() -> str:
    """The session bus the portal is on (its socket path; the guid changes at each login)."""
    addr = os.environ.get("DBUS_SESSION_BUS_ADDRESS") or ""
    m = re.search(r"unix:(?:path|abstract)=([^,;]+)", addr)
    return (m.group(1) if m else addr)[:200]


def info(display: VirtualDisplay, now: dt.datetime | None = None) -> dict:
    expires = None
    if display.state == VirtualDisplay.LINGERING and display.deadline:
        left = (display.deadline - (now or timezone.now())).total_seconds()
        expires = max(0, int(left * 1000))
    if display.owned:
        running, region = _alive(display), None
    else:
        if display.backend in ("wlr", "kwin"):
            running = capture._socket_live(display.wayland)
        elif display.backend in ("gnome", "portal"):
            running = capture.session_bus_live()
        else:
            running = capture.x_display_live(display.x_display)
        region = {"left": display.x, "top": display.y, "width": display.width,
                  "height": display.height}  # fmt: skip
    return {
        "slot": display.slot,
        "backend": display.backend,
        "owned": display.owned,
        "mode": display.mode,
        "state": display.state,
        "expires_in_ms": expires,
        "sessions": display.sessions,
        "pin_on_leave": display.pin_on_leave,
        "client": display.client or None,
        "group": display.group,
        "display_index": display.display_index,
        "x": display.x,
        "y": display.y,
        "identity_slot": display.identity_slot,
        "topology": display.topology,
        "x_display": display.x_display or None,
        # wlroots backends: the output captured and the compositor's socket
        "output": display.output or None,
        "wayland_display": display.wayland or None,
        "pid": display.pid,
        "running": running,
        # Attached: the monitor of the X screen that is captured (and where input lands).
        "region": region,
    }


def state() -> dict:
    """GET /display/state: the rows are read again only when the database moved; whether each
    display's server still runs is looked at per request (a process or socket check)."""
    now = timezone.now()
    rows = dbversion.cached("displays.rows", lambda: list(VirtualDisplay.objects.all()))
    return {"displays": [info(d, now) for d in rows]}
