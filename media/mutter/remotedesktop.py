"""Keyboard and mouse into a GNOME (mutter) desktop: org.gnome.Mutter.RemoteDesktop, over jeepney.

`MutterInput` has the interface of media.input.xtest.XInput and WlrInput (their common base
media.input.injector.Injector). Mutter ties a RemoteDesktop session to the D-Bus connection
that created it, like a ScreenCast one, so each instance holds ONE connection for its life.
An absolute pointer position is given relative to a ScreenCast stream of the same session:
the instance records the monitor in a ScreenCast session linked to its RemoteDesktop session
(`remote-desktop-session-id`); nobody consumes that stream, so mutter renders nothing for it.
Keeping input apart from the capture's own session lets input exist before the first frame
and lets the capture reopen without touching input.

Keys travel as Linux evdev codes (NotifyKeyboardKeycode) under the US positions of
media.wayland.xkbmap, as on wlroots; mutter tracks modifiers itself. Text travels as keysyms
(NotifyKeyboardKeysym), which mutter maps through the desktop's own layout.
"""

from __future__ import annotations

import logging
import time

from jeepney import DBusAddress, Properties, new_method_call
from jeepney.wrappers import DBusErrorResponse, unwrap_msg

from media.input.injector import Injector, _clamp
from media.input.keymap import keysym_name
from media.input.limiter import RateLimiter
from media.input.xtest import InputUnavailable
from media.mutter.screencast import (
    SCREENCAST,
    ScreenCastError,
    _call,
    _connect,
    _monitors,
    _require_name,
    end_seen,
    watch_end,
)
from media.wayland import xkbmap

log = logging.getLogger("media.input")

REMOTEDESKTOP = "org.gnome.Mutter.RemoteDesktop"
_RD_PATH = "/org/gnome/Mutter/RemoteDesktop"
_RD_SESSION_IF = "org.gnome.Mutter.RemoteDesktop.Session"
_SC_PATH = "/org/gnome/Mutter/ScreenCast"
_SC_SESSION_IF = "org.gnome.Mutter.ScreenCast.Session"
_STREAM_IF = "org.gnome.Mutter.ScreenCast.Stream"

AXIS_VERTICAL, AXIS_HORIZONTAL = 0, 1
WAKE_S = 0.2


class MutterInputUnavailable(InputUnavailable):
    """Mutter's RemoteDesktop cannot be reached, refused a session, or the session ended."""


class MutterInput(Injector):
    BUTTONS = xkbmap.EVDEV_BUTTONS

    def __init__(
        self,
        connector: str,
        *,
        bus_address: str | None = None,
        limiter: RateLimiter | None = None,
        timeout: float = 5.0,
        home: bool = False,
    ):
        """`home`: put the pointer in the middle of the monitor once the devices exist (see
        streaming/session_display.placing: mutter opens new windows on the pointer's
        monitor). Off for a session's own input: the desktop's one pointer stays where it is
        until the player moves it."""
        self.connector = connector
        self._timeout = timeout
        self._rd_session: DBusAddress | None = None
        try:
            self._conn = _connect(bus_address, timeout)
        except ScreenCastError as exc:
            raise MutterInputUnavailable(str(exc)) from exc
        try:
            width, height = self._start(connector)
        except ScreenCastError as exc:
            self._conn.close()
            raise MutterInputUnavailable(str(exc)) from exc
        except BaseException:
            self._conn.close()
            raise
        self._setup(width, height, limiter)
        self._pos = (width // 2, height // 2)
        try:
            self._wake(home)
        except BaseException:
            self.close()
            raise

    def _wake(self, home: bool) -> None:
        """Bring the session's virtual keyboard and pointer into the seat now. Mutter adds a
        virtual device on its first event, asynchronously: on a seat with no other keyboard
        or pointer (headless mutter, measured) the client gains wl_keyboard/wl_pointer only
        then, and the first key or click was lost. A motion by (0, 0) and a Shift tap do
        nothing visible; WAKE_S later both are in place (measured: without the wait, a
        Shift+key sent at once was lost with everything after it). Then, with `home`, the
        pointer goes to the middle of the monitor."""
        with self._lock:
            self._notify("NotifyPointerMotionRelative", "dd", (0.0, 0.0))
            self._notify("NotifyKeyboardKeycode", "ub", (xkbmap.SHIFT_CODE, True))
            self._notify("NotifyKeyboardKeycode", "ub", (xkbmap.SHIFT_CODE, False))
        time.sleep(WAKE_S)
        if home:
            with self._lock:
                self._send_move_to(self.width // 2, self.height // 2)

    def _start(self, connector: str) -> tuple[int, int]:
        conn, timeout = self._conn, self._timeout
        for name in (REMOTEDESKTOP, SCREENCAST):
            _require_name(conn, name, timeout)
        heads = {m.connector: m for m in _monitors(conn, timeout)}
        head = heads.get(connector)
        if head is None or not head.width:
            raise ScreenCastError(
                f"mutter has no active monitor {connector!r} (it has: {', '.join(heads) or 'none'})"
            )
        rd = DBusAddress(_RD_PATH, REMOTEDESKTOP, REMOTEDESKTOP)
        (rd_path,) = _call(conn, new_method_call(rd, "CreateSession"), timeout,
                           "RemoteDesktop.CreateSession")  # fmt: skip
        self._rd_session = DBusAddress(rd_path, REMOTEDESKTOP, _RD_SESSION_IF)
        msg = Properties(self._rd_session).get("SessionId")
        ((_sig, session_id),) = _call(conn, msg, timeout, "reading the RemoteDesktop SessionId")
        sc = DBusAddress(_SC_PATH, SCREENCAST, SCREENCAST)
        link = {"remote-desktop-session-id": ("s", session_id)}
        msg = new_method_call(sc, "CreateSession", "a{sv}", (link,))
        (sc_path,) = _call(conn, msg, timeout, "ScreenCast.CreateSession (linked)")
        session = DBusAddress(sc_path, SCREENCAST, _SC_SESSION_IF)
        props = {"cursor-mode": ("u", 0)}
        msg = new_method_call(session, "RecordMonitor", "sa{sv}", (connector, props))
        (self.stream_path,) = _call(conn, msg, timeout, f"RecordMonitor({connector})")
        self._watch = watch_end(conn, _RD_SESSION_IF, rd_path, REMOTEDESKTOP, timeout)
        # Start on the RemoteDesktop session; it starts the linked ScreenCast session.
        _call(conn, new_method_call(self._rd_session, "Start"), timeout,
              "RemoteDesktop.Session.Start")  # fmt: skip
        return head.width, head.height

    def _notify(self, method: str, signature: str, args: tuple) -> None:
        """One Notify* call, waiting for mutter's reply: events arrive in order, and a
        session mutter has ended is reported rather than typed into the void."""
        msg = new_method_call(self._rd_session, method, signature, args)
        try:
            unwrap_msg(self._conn.send_and_get_reply(msg, timeout=self._timeout))
        except DBusErrorResponse as exc:
            detail = exc.data[0] if exc.data else exc.name
            raise MutterInputUnavailable(f"mutter refused {method}: {detail}") from exc
        except (OSError, TimeoutError, ValueError) as exc:
            raise MutterInputUnavailable(f"mutter's RemoteDesktop is gone ({exc})") from exc

    # -- keyboard ---------------------------------------------------------------------------
    def keycode(self, vk: int) -> int | None:
        """The evdev code of the key a VK code names, or None."""
        name = keysym_name(vk)
        return xkbmap.code_for_keysym_name(name) if name else None

    def _send_key(self, code: int, down: bool) -> None:
        self._notify("NotifyKeyboardKeycode", "ub", (code, down))

    def _type_one(self, ch: str, sym: int) -> bool:
        """Each character goes as its keysym: mutter finds the key (and level) in its own
        keymap."""
        # GAP: a keysym the desktop's keymap lacks is dropped by mutter without an error (ö on
        # a US layout), yet counted here as typed: RemoteDesktop can neither bind a spare key
        # (as the wlroots path does) nor say which keysyms it resolved.
        self._notify("NotifyKeyboardKeysym", "ub", (sym, True))
        self._notify("NotifyKeyboardKeysym", "ub", (sym, False))
        return True

    def restore_keymap(self) -> int:
        """Nothing to restore: text never changes the desktop's keymap here."""
        return 0

    # -- mouse ------------------------------------------------------------------------------
    def _send_button(self, code: int, down: bool) -> None:
        self._notify("NotifyPointerButton", "ib", (code, down))

    def _send_move_by(self, dx: int, dy: int) -> None:
        self._notify("NotifyPointerMotionRelative", "dd", (float(dx), float(dy)))
        self._pos = (
            _clamp(self._pos[0] + dx, 0, self.width - 1),
            _clamp(self._pos[1] + dy, 0, self.height - 1),
        )

    def _send_move_to(self, x: int, y: int) -> None:
        self._notify("NotifyPointerMotionAbsolute", "sdd", (self.stream_path, float(x), float(y)))
        self._pos = (x, y)

    def _send_wheel(self, notches: int, horizontal: bool) -> None:
        steps = notches if horizontal else -notches  # mutter: positive is down/right
        axis = AXIS_HORIZONTAL if horizontal else AXIS_VERTICAL
        self._notify("NotifyPointerAxisDiscrete", "ui", (axis, steps))

    # -- lifetime ---------------------------------------------------------------------------
    def pointer(self) -> tuple[int, int]:
        """Where we last put the pointer, in monitor pixels."""
        return self._pos

    def ended(self) -> str | None:
        """Why mutter ended the session, or None while it runs (reads what already came)."""
        if self._closed:
            return "closed"
        with self._lock:
            return end_seen(self._conn, self._watch, "RemoteDesktop")

    def release_all(self) -> int:
        """Let go of every key and button still held; how many there were."""
        with self._lock:
            if self._closed:
                return 0
            try:
                for code in sorted(self._held_keys):
                    self._send_key(code, False)
                for code in sorted(self._held_buttons):
                    self._send_button(code, False)
            except MutterInputUnavailable as exc:
                log.debug("release_all: %s", exc)
            return self._forget_held()

    def close(self) -> None:
        """Release what is held, stop the session (mutter drops it and its stream) and close
        the connection; safe to call twice, and when mutter is already gone."""
        if self._closed:
            return
        try:
            self.release_all()
        finally:
            with self._lock:
                self._closed = True
                try:
                    stop = new_method_call(self._rd_session, "Stop")
                    self._conn.send_and_get_reply(stop, timeout=self._timeout)
                except (OSError, TimeoutError, ValueError):
                    pass  # mutter or the bus went away: the session went with it
                finally:
                    self._conn.close()
