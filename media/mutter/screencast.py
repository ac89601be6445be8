"""A client of mutter's ScreenCast D-Bus interface (org.gnome.Mutter.ScreenCast), over jeepney.

Mutter ties a ScreenCast session to the D-Bus connection that created it: calls from another
connection get "Object does not exist", and mutter ends the session when that connection
closes. So each `ScreenCast` holds ONE connection from `CreateSession` until `close`, and the
PipeWire stream lives exactly as long as it does. Everything that can go wrong before a node
exists (no session bus, no mutter on it, an unknown connector, no `PipeWireStreamAdded` in
time) raises `ScreenCastError` with a sentence that names the cause.
"""

from __future__ import annotations

from dataclasses import dataclass

from jeepney import DBusAddress, MatchRule, new_method_call
from jeepney.io.blocking import DBusConnection

from media import sessionbus

SCREENCAST = "org.gnome.Mutter.ScreenCast"
DISPLAYCONFIG = "org.gnome.Mutter.DisplayConfig"
_SC_PATH = "/org/gnome/Mutter/ScreenCast"
_DC_PATH = "/org/gnome/Mutter/DisplayConfig"
_SESSION_IF = "org.gnome.Mutter.ScreenCast.Session"
_STREAM_IF = "org.gnome.Mutter.ScreenCast.Stream"

_BUS = DBusAddress("/org/freedesktop/DBus", "org.freedesktop.DBus", "org.freedesktop.DBus")

CURSOR_HIDDEN, CURSOR_EMBEDDED, CURSOR_METADATA = 0, 1, 2


class ScreenCastError(Exception):
    """The screencast could not be set up (or went away); the message names why."""


@dataclass(frozen=True)
class Monitor:
    connector: str  # e.g. "Meta-0" (headless virtual monitor), "DP-1", "eDP-1"
    width: int
    height: int
    refresh: float
    primary: bool = False  # in GetCurrentState's primary logical monitor


def _connect(bus_address: str | None, timeout: float) -> DBusConnection:
    return sessionbus.connect(bus_address, timeout, ScreenCastError, "mutter's ScreenCast")


def _call(conn: DBusConnection, msg, timeout: float, doing: str) -> tuple:
    return sessionbus.call(conn, msg, timeout, doing, ScreenCastError)


def _add_match(rule: MatchRule):
    """The bus routes a broadcast signal only to a connection that asked for it."""
    return new_method_call(_BUS, "AddMatch", "s", (rule.serialise(),))


def watch_end(conn: DBusConnection, interface: str, path: str, owner: str, timeout: float) -> list:
    """Filters that catch mutter ending a session: the session's `Closed` signal, or `owner`
    (the service's bus name) leaving the bus. Read by `end_seen`."""
    closed = MatchRule(type="signal", interface=interface, member="Closed", path=path)
    gone = MatchRule(
        type="signal", sender="org.freedesktop.DBus", interface="org.freedesktop.DBus",
        member="NameOwnerChanged", path="/org/freedesktop/DBus",
    )  # fmt: skip
    gone.add_arg_condition(0, owner)
    for rule in (closed, gone):
        _call(conn, _add_match(rule), timeout, "AddMatch")
    return [conn.filter(closed), conn.filter(gone)]


def end_seen(conn: DBusConnection, watch: list, kind: str, who: str = "mutter") -> str | None:
    """Why `who` (the service) ended the `kind` session watched by `watch_end`, or None while
    it runs. Never blocks: it reads what the bus has already sent."""
    try:
        while True:
            conn.recv_messages(timeout=0)
    except TimeoutError:
        pass
    except (OSError, ValueError) as exc:
        return f"the D-Bus session bus connection ended ({exc})"
    if watch[0].queue:
        return f"{who} closed the {kind} session"
    if any(not m.body[2] for m in watch[1].queue):
        return f"{who} left the session bus"
    return None


def _require_name(conn: DBusConnection, name: str, timeout: float) -> None:
    msg = new_method_call(_BUS, "NameHasOwner", "s", (name,))
    (owned,) = _call(conn, msg, timeout, f"asking the bus for {name}")
    if not owned:
        raise ScreenCastError(
            f"{name} is not on the session bus: no GNOME Shell / mutter session runs there "
            "(or it is not a GNOME desktop)"
        )


def _monitors(conn: DBusConnection, timeout: float, require=()) -> list[Monitor]:
    for name in (*require, DISPLAYCONFIG):
        _require_name(conn, name, timeout)
    dc = DBusAddress(_DC_PATH, DISPLAYCONFIG, DISPLAYCONFIG)
    reply = _call(conn, new_method_call(dc, "GetCurrentState"), timeout, "GetCurrentState")
    # Logical monitors: (x, y, scale, transform, primary, [(connector, ...)], props).
    primary = {spec[0] for lm in reply[2] if lm[4] for spec in lm[5]}
    out = []
    for (connector, _vendor, _product, _serial), modes, _props in reply[1]:
        current = next((m for m in modes if m[6].get("is-current", ("b", False))[1]), None)
        _id, width, height, refresh = current[:4] if current else ("", 0, 0, 0.0)
        out.append(Monitor(connector, width, height, refresh, connector in primary))
    return out


def logical_monitors(bus_address: str | None = None, timeout: float = 5.0) -> list[dict]:
    """Where each logical monitor sits on the desktop: {x, y, width, height, primary,
    connectors}, its size from the first connector's current mode."""
    conn = _connect(bus_address, timeout)
    try:
        _require_name(conn, DISPLAYCONFIG, timeout)
        dc = DBusAddress(_DC_PATH, DISPLAYCONFIG, DISPLAYCONFIG)
        reply = _call(conn, new_method_call(dc, "GetCurrentState"), timeout, "GetCurrentState")
    finally:
        conn.close()
    sizes = {}
    for (connector, *_), modes, _props in reply[1]:
        current = next((m for m in modes if m[6].get("is-current", ("b", False))[1]), None)
        sizes[connector] = (current[1], current[2]) if current else (0, 0)
    out = []
    for x, y, _scale, _transform, primary, specs, _props in reply[2]:
        connectors = [spec[0] for spec in specs]
        width, height = sizes.get(connectors[0], (0, 0)) if connectors else (0, 0)
        out.append({"x": x, "y": y, "width": width, "height": height,
                    "primary": bool(primary), "connectors": connectors})  # fmt: skip
    return out


def monitors(bus_address: str | None = None, timeout: float = 5.0, require=()) -> list[Monitor]:
    """The monitors mutter drives (DisplayConfig.GetCurrentState), each with its current mode
    (0x0 when it has none: connected but off). `require`: bus names that must be there too
    (ScreenCastError naming the first missing one)."""
    conn = _connect(bus_address, timeout)
    try:
        return _monitors(conn, timeout, require)
    finally:
        conn.close()


class ScreenCast:
    """One ScreenCast session with one stream: a monitor (`connector`) or, with `connector`
    None, a new virtual monitor of the stream's negotiated size (RecordVirtual). After the
    constructor returns, `node_id` is the PipeWire node carrying the frames."""

    def __init__(
        self,
        connector: str | None,
        *,
        cursor_mode: int = CURSOR_EMBEDDED,
        bus_address: str | None = None,
        timeout: float = 5.0,
    ):
        self.connector = connector
        self.node_id: int | None = None
        self.session_path: str | None = None
        self._timeout = timeout
        self._ended: str | None = None
        self._watch: list = []
        self._conn = _connect(bus_address, timeout)
        try:
            self._start(connector, cursor_mode)
        except BaseException:
            self.close()
            raise

    def _start(self, connector: str | None, cursor_mode: int) -> None:
        conn, timeout = self._conn, self._timeout
        _require_name(conn, SCREENCAST, timeout)
        if connector is not None:
            known = [m.connector for m in _monitors(conn, timeout)]
            if connector not in known:
                raise ScreenCastError(
                    f"mutter has no monitor {connector!r} (it has: {', '.join(known) or 'none'})"
                )
        sc = DBusAddress(_SC_PATH, SCREENCAST, SCREENCAST)
        msg = new_method_call(sc, "CreateSession", "a{sv}", ({},))
        (self.session_path,) = _call(conn, msg, timeout, "ScreenCast.CreateSession")
        session = DBusAddress(self.session_path, SCREENCAST, _SESSION_IF)
        props = {"cursor-mode": ("u", cursor_mode)}
        if connector is None:
            msg = new_method_call(session, "RecordVirtual", "a{sv}", (props,))
            doing = "ScreenCast.Session.RecordVirtual"
        else:
            msg = new_method_call(session, "RecordMonitor", "sa{sv}", (connector, props))
            doing = f"ScreenCast.Session.RecordMonitor({connector})"
        (stream_path,) = _call(conn, msg, timeout, doing)
        # No `sender`: the signal carries mutter's unique name, which jeepney's local filter
        # would compare with the well-known one and never match; the path is ours alone.
        rule = MatchRule(
            type="signal", interface=_STREAM_IF, member="PipeWireStreamAdded", path=stream_path
        )
        _call(conn, _add_match(rule), timeout, "AddMatch")
        with conn.filter(rule) as queue:
            _call(conn, new_method_call(session, "Start"), timeout, "ScreenCast.Session.Start")
            try:
                signal = conn.recv_until_filtered(queue, timeout=timeout)
            except TimeoutError as exc:
                raise ScreenCastError(
                    f"mutter sent no PipeWireStreamAdded for {stream_path} in {timeout:g} s "
                    "(is PipeWire running for this user, in the same XDG_RUNTIME_DIR?)"
                ) from exc
        (self.node_id,) = signal.body
        self._watch = watch_end(conn, _SESSION_IF, self.session_path, SCREENCAST, timeout)

    def ended(self) -> str | None:
        """Why the stream has ended (mutter closed the session, left the bus, or the bus
        went away), or None while it runs. Never blocks: it reads what the bus has already
        sent. Mutter removes the node then, but pipewiresrc keeps waiting rather than
        exiting, so this is how a capture learns its screen is gone."""
        if self._conn is None:
            return "closed"
        if self._ended is None:
            self._ended = end_seen(self._conn, self._watch, "ScreenCast")
        return self._ended

    def close(self) -> None:
        """Stop the session (mutter removes the stream node) and drop the connection; safe to
        call twice, and when mutter is already gone."""
        conn, self._conn = self._conn, None
        if conn is None:
            return
        try:
            if self.session_path is not None:
                session = DBusAddress(self.session_path, SCREENCAST, _SESSION_IF)
                conn.send_and_get_reply(new_method_call(session, "Stop"), timeout=self._timeout)
        except (OSError, TimeoutError, ValueError):
            pass  # mutter or the bus went away: the session went with it
        finally:
            conn.close()
