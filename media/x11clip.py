"""Text both ways between a session's X display CLIPBOARD and the host (native plane clipboard).

`X11Clipboard(display, on_copy)` connects to the session's X server with a 1x1 window of its
own and runs one thread that owns the connection (python-xlib is not used from two threads):
- `set_text(text)` (any thread) queues the text; the thread takes CLIPBOARD ownership and then
  answers every app's paste (`SelectionRequest`) with it, as UTF8_STRING, STRING or TEXT, plus
  TARGETS.
- When another client takes CLIPBOARD ownership (an app copied), XFixes tells us
  (`SetSelectionOwnerNotify`, no polling); the thread asks the owner for UTF8_STRING and calls
  `on_copy(text)` with what came back, when it is acceptable text.

Both directions are bounded by `clean`: at most MAX_BYTES of UTF-8, printable characters plus
tab and line breaks only. Anything else is dropped (counted in `dropped`), never half-sent.
Selections sent with the INCR protocol (larger than the server's request size) are dropped too:
they are above the bound anyway.
"""

from __future__ import annotations

import logging
import queue
import select
import threading
import time

from Xlib import X, Xatom, display, error
from Xlib.ext import xfixes
from Xlib.protocol import event

log = logging.getLogger("media.x11clip")

MAX_BYTES = 64 * 1024
CONVERT_TIMEOUT_S = 2.0
_ALLOWED_BLANKS = "\t\n\r"


class ClipboardUnavailable(Exception):
    """The display cannot be reached or has no XFixes (no copy notifications)."""


def clean(text) -> str | None:
    """`text` when it may cross (a str of printable text, tab and line breaks, at most
    MAX_BYTES as UTF-8); None otherwise."""
    if not isinstance(text, str) or not text:
        return None
    if len(text) > MAX_BYTES or len(text.encode("utf-8", "surrogatepass")) > MAX_BYTES:
        return None
    if not all(c.isprintable() or c in _ALLOWED_BLANKS for c in text):
        return None
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:  # lone surrogates
        return None
    return text


class X11Clipboard:
    def __init__(self, display_name: str, on_copy):
        try:
            self.d = display.Display(display_name)
        except (error.DisplayError, OSError) as exc:
            raise ClipboardUnavailable(f"cannot open display {display_name}: {exc}") from None
        if not self.d.has_extension("XFIXES"):
            self.d.close()
            raise ClipboardUnavailable(f"display {display_name} has no XFIXES extension")
        self.d.xfixes_query_version()
        self._X = X
        atom = self.d.intern_atom
        self.CLIPBOARD = atom("CLIPBOARD")
        self.UTF8 = atom("UTF8_STRING")
        self.TARGETS = atom("TARGETS")
        self.TEXT = atom("TEXT")
        self.INCR = atom("INCR")
        self.PROP = atom("HOST_CLIPBOARD")
        self.window = self.d.screen().root.create_window(0, 0, 1, 1, 0, X.CopyFromParent)
        self.d.xfixes_select_selection_input(
            self.window, self.CLIPBOARD, xfixes.XFixesSetSelectionOwnerNotifyMask
        )
        self.d.flush()
        self.on_copy = on_copy
        self.owned: bytes | None = None  # what we serve while we own CLIPBOARD
        self.sent = self.received = self.dropped = 0
        self._wanted: queue.SimpleQueue = queue.SimpleQueue()
        self._halt = threading.Event()
        self._converting_since: float | None = None
        self._thread = threading.Thread(target=self._run, daemon=True, name="x11-clipboard")
        self._thread.start()

    # -- any thread -----------------------------------------------------------------------------
    def set_text(self, text) -> bool:
        """Make `text` what apps paste; False (dropped) when it is not acceptable text."""
        text = clean(text)
        if text is None:
            self.dropped += 1
            return False
        self._wanted.put(text.encode("utf-8"))
        return True

    def close(self) -> None:
        self._halt.set()
        self._thread.join(3)
        try:
            self.d.close()
        except Exception:  # the server may be gone already
            pass

    # -- the connection's thread ---------------------------------------------------------------
    def _run(self) -> None:
        try:
            while not self._halt.is_set():
                self._take_wanted()
                if not self.d.pending_events():
                    select.select([self.d.fileno()], [], [], 0.05)
                while self.d.pending_events():
                    self._event(self.d.next_event())
                if self._converting_since and time.monotonic() - self._converting_since > (
                    CONVERT_TIMEOUT_S
                ):
                    self._converting_since = None  # the owner never answered
        except Exception:  # the display went away: the session is ending
            if not self._halt.is_set():
                log.info("clipboard thread stopped", exc_info=True)

    def _take_wanted(self) -> None:
        data = None
        while True:
            try:
                data = self._wanted.get_nowait()
            except queue.Empty:
                break
        if data is None:
            return
        self.owned = data
        self.window.set_selection_owner(self.CLIPBOARD, self._X.CurrentTime)
        self.d.flush()
        owner = self.d.get_selection_owner(self.CLIPBOARD)
        if getattr(owner, "id", owner) == self.window.id:
            self.sent += 1
        else:
            log.info("could not take the clipboard of the session display")

    def _event(self, ev) -> None:
        X = self._X
        if ev.type == X.SelectionRequest:
            self._answer(ev)
        elif ev.type == X.SelectionClear:
            self.owned = None  # an app copied: XFixes tells us what to read
        elif ev.type == X.SelectionNotify:
            self._read(ev)
        elif getattr(ev, "owner", None) is not None and getattr(ev, "selection", None) == (
            self.CLIPBOARD
        ):
            owner = ev.owner.id if hasattr(ev.owner, "id") else ev.owner
            if owner not in (0, self.window.id):
                self.window.convert_selection(self.CLIPBOARD, self.UTF8, self.PROP, X.CurrentTime)
                self.d.flush()
                self._converting_since = time.monotonic()

    def _answer(self, ev) -> None:
        X = self._X
        prop = ev.property or ev.target
        ok = self.owned is not None and ev.selection == self.CLIPBOARD
        if ok and ev.target == self.TARGETS:
            targets = [self.TARGETS, self.UTF8, Xatom.STRING, self.TEXT]
            ev.requestor.change_property(prop, Xatom.ATOM, 32, targets)
        elif ok and ev.target in (self.UTF8, Xatom.STRING, self.TEXT):
            kind = Xatom.STRING if ev.target == Xatom.STRING else self.UTF8
            ev.requestor.change_property(prop, kind, 8, self.owned)
        else:
            prop = X.NONE
        reply = event.SelectionNotify(
            time=ev.time,
            requestor=ev.requestor,
            selection=ev.selection,
            target=ev.target,
            property=prop,
        )
        ev.requestor.send_event(reply)
        self.d.flush()

    def _read(self, ev) -> None:
        self._converting_since = None
        if ev.property == self._X.NONE:
            return  # the owner has no text
        reply = self.window.get_full_property(self.PROP, self._X.AnyPropertyType)
        self.window.delete_property(self.PROP)
        self.d.flush()
        if reply is None or reply.property_type == self.INCR:
            self.dropped += 1
            return
        value = reply.value
        data = value if isinstance(value, bytes) else bytes(value)
        try:
            text = clean(data.decode("utf-8"))
        except UnicodeDecodeError:
            text = None
        if text is None:
            self.dropped += 1
            return
        self.received += 1
        try:
            self.on_copy(text)
        except Exception:  # a broken listener must not stop the clipboard
            log.exception("clipboard listener failed")
