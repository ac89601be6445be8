"""The desktop user's D-Bus session bus, as the desktop's screencast clients reach it (mutter's
ScreenCast and RemoteDesktop, the desktop portal): one connection, and calls whose failures
become the client's own error class with a sentence naming the cause."""

from __future__ import annotations

import os

from jeepney.io.blocking import DBusConnection, open_dbus_connection
from jeepney.wrappers import DBusErrorResponse, unwrap_msg


def connect(bus_address: str | None, timeout: float, error: type[Exception], service: str,
            enable_fds: bool = False) -> DBusConnection:  # fmt: skip
    """A connection to `bus_address` (else this process's session bus); `error` when there is
    none or it cannot be reached. `service` names what is reached over it, for the message."""
    addr = bus_address or os.environ.get("DBUS_SESSION_BUS_ADDRESS")
    if not addr:
        raise error(
            f"no D-Bus session bus: DBUS_SESSION_BUS_ADDRESS is not set ({service} is reached "
            "over the desktop user's session bus)"
        )
    try:
        return open_dbus_connection(addr, auth_timeout=timeout, enable_fds=enable_fds)
    except (OSError, ValueError) as exc:
        raise error(f"cannot connect to the D-Bus session bus at {addr}: {exc}") from exc


def call(conn: DBusConnection, msg, timeout: float, doing: str, error: type[Exception],
         ended_too: bool = False) -> tuple:  # fmt: skip
    """The reply's body; `error` for an error reply or no reply in `timeout`, and with
    `ended_too` for the connection ending as well (else that OSError reaches the caller)."""
    try:
        return unwrap_msg(conn.send_and_get_reply(msg, timeout=timeout))
    except DBusErrorResponse as exc:
        detail = exc.data[0] if exc.data else exc.name
        raise error(f"{doing} failed: {detail} ({exc.name})") from exc
    except TimeoutError as exc:
        raise error(f"{doing}: no reply in {timeout:g} s") from exc
    except (OSError, ValueError) as exc:
        if not ended_too:
            raise
        raise error(f"{doing}: the session bus connection ended ({exc})") from exc
