"""An X11 app that copies and pastes through CLIPBOARD as ordinary apps do, written apart from
the host's media/x11clip.py (plain python-xlib), so the tests see the host from the outside.

    python -m tests.support.x11_clip_app DISPLAY copy FILE   # own CLIPBOARD with FILE's text
                                                             # (UTF-8) and serve pastes until
                                                             # killed or another owner takes it
    python -m tests.support.x11_clip_app DISPLAY paste       # print CLIPBOARD as UTF8_STRING
                                                             # (exit 3 when nobody owns it)
"""

from __future__ import annotations

import sys
import time

from Xlib import X, Xatom, display
from Xlib.protocol import event


def _window(d):
    return d.screen().root.create_window(0, 0, 1, 1, 0, X.CopyFromParent)


def copy(name: str, data: bytes) -> None:
    d = display.Display(name)
    w = _window(d)
    clipboard, utf8 = d.intern_atom("CLIPBOARD"), d.intern_atom("UTF8_STRING")
    targets = d.intern_atom("TARGETS")
    w.set_selection_owner(clipboard, X.CurrentTime)
    d.sync()
    print("owned", flush=True)
    while True:
        ev = d.next_event()
        if ev.type == X.SelectionClear:
            print("cleared", flush=True)
            return
        if ev.type != X.SelectionRequest:
            continue
        prop = ev.property or ev.target
        if ev.target == targets:
            ev.requestor.change_property(prop, Xatom.ATOM, 32, [targets, utf8])
        elif ev.target in (utf8, Xatom.STRING):
            ev.requestor.change_property(prop, ev.target, 8, data)
        else:
            prop = X.NONE
        ev.requestor.send_event(
            event.SelectionNotify(time=ev.time, requestor=ev.requestor, selection=ev.selection,
                                  target=ev.target, property=prop)
        )  # fmt: skip
        d.flush()


def paste(name: str) -> int:
    d = display.Display(name)
    w = _window(d)
    clipboard, utf8 = d.intern_atom("CLIPBOARD"), d.intern_atom("UTF8_STRING")
    prop = d.intern_atom("PASTED")
    owner = d.get_selection_owner(clipboard)
    if getattr(owner, "id", owner) == X.NONE:
        return 3
    w.convert_selection(clipboard, utf8, prop, X.CurrentTime)
    d.flush()
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        if not d.pending_events():
            time.sleep(0.01)
            continue
        ev = d.next_event()
        if ev.type == X.SelectionNotify:
            if ev.property == X.NONE:
                return 4
            got = w.get_full_property(prop, X.AnyPropertyType)
            sys.stdout.buffer.write(bytes(got.value) if got else b"")
            return 0
    return 5


if __name__ == "__main__":
    if sys.argv[2] == "copy":
        with open(sys.argv[3], "rb") as fh:
            copy(sys.argv[1], fh.read())
    else:
        sys.exit(paste(sys.argv[1]))
