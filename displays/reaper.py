"""What drives the display countdowns, and what the host does with displays at start and stop.

The supervisor calls these: `tick()` as a periodic job (every `TICK_S`), `on_host_start()`
before the serving processes start and `on_host_stop()` after they are gone. A loop in the
supervisor rather than a Celery countdown task: the deadline lives in the database, so nothing
is lost when a worker restarts, a re-acquire needs no task revocation, and the same code expires
countdowns that ran out while the host was down. Every function logs and swallows its own
errors: a display problem must never take the supervisor down.
"""

from __future__ import annotations

import datetime as dt
import logging

from django.utils import timezone

from displays import gnome_monitors, headless, machine, xvfb
from displays.models import VirtualDisplay

log = logging.getLogger(__name__)

TICK_S = 1.0


def tick() -> int:
    """Expire the countdowns that ran out; returns how many."""
    try:
        return machine.expire_due()
    except Exception:  # see module docstring
        log.exception("display countdown tick failed")
        return 0


def on_host_stop() -> int:
    """Sessions end with the host: active displays move on per their policy; no server stays."""
    try:
        # Attached displays (the operator's X server) are only forgotten, never stopped.
        VirtualDisplay.objects.filter(owned=False).delete()
        for display in VirtualDisplay.objects.filter(state=VirtualDisplay.ACTIVE):
            keep = machine.keep_alive(display)
            if keep["mode"] == "forever":
                display.state = VirtualDisplay.PINNED
            elif keep["mode"] == "duration":
                display.state = VirtualDisplay.LINGERING
                display.deadline = timezone.now() + dt.timedelta(seconds=keep["seconds"])
            else:
                if display.backend == machine.MUTTER:
                    gnome_monitors.stop(display.pid)
                elif display.backend != machine.SWAY:
                    xvfb.stop(display.pid)
                display.delete()  # a headless output goes with the compositor, below
                continue
            display.sessions = 0
            display.save()
        if headless.stop():
            log.info("stopped the headless compositor")
        killed = xvfb.stop_all() + gnome_monitors.stop_all()  # GNOME's monitors go too
        VirtualDisplay.objects.update(pid=None, x_display="", output="", wayland="")
        if killed:
            log.info("stopped %d virtual display server(s)", killed)
        return killed
    except Exception:
        log.exception("display teardown at host stop failed")
        return 0


def on_host_start() -> dict:
    """Expire countdowns that ended while the host was down; bring the kept displays back."""
    result = {"expired": 0, "restored": 0}
    try:
        headless.sweep()  # a crashed run's compositor, Xwayland and apps
        xvfb.stop_all()  # strays of a crashed run
        gnome_monitors.stop_all()
        VirtualDisplay.objects.filter(owned=False).delete()  # no session survived; never restart
        VirtualDisplay.objects.filter(state=VirtualDisplay.ACTIVE).update(
            state=VirtualDisplay.LINGERING, deadline=timezone.now(), sessions=0
        )  # a crash left them active: no session survived it
        result["expired"] = machine.expire_due()
        for display in VirtualDisplay.objects.all():
            try:
                if display.backend == machine.SWAY:
                    display.output = ""
                    machine._start_output(display)  # a kept output, on a new compositor
                elif display.backend == machine.MUTTER:
                    machine._start_monitor(display)
                else:
                    display.pid, display.x_display = xvfb.start(display.width, display.height)
            except machine.DisplayError as exc:
                log.warning("kept display slot %d not restored: %s", display.slot, exc.message)
                display.delete()
                continue
            except xvfb.BackendError as exc:
                log.warning("kept display slot %d not restored: %s", display.slot, exc)
                display.delete()
                continue
            display.save(update_fields=["pid", "x_display", "output", "wayland", "x", "y",
                                        "updated_at"])  # fmt: skip
            machine._emit("display.created", {"backend": display.backend, "mode": display.mode})
            result["restored"] += 1
    except Exception:
        log.exception("display restore at host start failed")
    return result
