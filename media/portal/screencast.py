"""A client of xdg-desktop-portal's ScreenCast interface (org.freedesktop.portal.ScreenCast),
over jeepney, with the restore token that lets the person consent once.

The portal answers each step (CreateSession, SelectSources, Start) with a Request object
whose `Response` signal carries the outcome; the object's path is fixed in advance by the
caller's unique bus name and a `handle_token` of ours, so we subscribe to it before calling
and can never miss the answer. A session belongs to the connection that made it (the portal
closes it when that connection goes), so `PortalScreenCast` holds ONE connection for the
session's life, as media/mutter/screencast.py does for mutter.

Persistence: SelectSources asks for persist_mode 2 (until revoked) and sends the token kept
from the last session; the Start response then carries a restore token, which is kept in the
host's state directory (`portal-screencast.json`, 0600, written atomically). A token appears
only when the portal's BACKEND grants persistence: xdg-desktop-portal-wlr 0.7 (Debian 12)
does only when it was started with XDPW_PERSIST_MODE=permanent (it has no dialog to ask about
it); without it there is no token, every session asks again, and the host says so rather than
claim a persistence it does not have. xdg-desktop-portal 1.16 keeps a token it accepted and
makes a new one otherwise, so a returned token equal to the one sent means it was used
(`restored`).
"""

from __future__ import annotations

import json
import logging
import os
import re
import secrets
import time
from dataclasses import dataclass

from jeepney import DBusAddress, MatchRule, new_method_call
from jeepney.io.blocking import DBusConnection
from jeepney.wrappers import DBusErrorResponse, unwrap_msg

from common.files import atomic_write
from common.statedir import ensure_state_dir, state_path
from media import sessionbus
from media.mutter.screencast import end_seen, watch_end

log = logging.getLogger("streaming.sessions")

PORTAL = "org.freedesktop.portal.Desktop"
SCREENCAST = "org.freedesktop.portal.ScreenCast"
_PATH = "/org/freedesktop/portal/desktop"
_REQUEST_IF = "org.freedesktop.portal.Request"
_SESSION_IF = "org.freedesktop.portal.Session"
_BUS = DBusAddress("/org/freedesktop/DBus", "org.freedesktop.DBus", "org.freedesktop.DBus")

SOURCE_MONITOR = 1
CURSOR_HIDDEN, CURSOR_EMBEDDED, CURSOR_METADATA = 1, 2, 4
PERSIST_NONE, PERSIST_TRANSIENT, PERSIST_PERSISTENT = 0, 1, 2
PERSIST_VERSION = 4  # the ScreenCast version that has persist_mode and restore_token
CONSENT_TIMEOUT_S = 60.0
STATE_FILE = "portal-screencast.json"
_UUID = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")

HOW_TO_CONSENT = (
    "start a session while someone is at the desktop to allow screen sharing in the portal's "
    "dialog, with 'Remember this selection' kept on where the dialog has it; "
    "xdg-desktop-portal-wlr shows no dialog: its config's chooser_type=none and "
    "output_name=OUTPUT pick the output"
)


class PortalError(Exception):
    """The portal screencast could not be set up or went away; the message names why."""


class PortalRefused(PortalError):
    """The person (or the portal's chooser) did not allow the screencast, or nobody answered
    in time: no consent. `outcome` is `refused` or `timeout`."""

    def __init__(self, message: str, outcome: str):
        super().__init__(message)
        self.outcome = outcome


@dataclass(frozen=True)
class Stream:
    node_id: int
    width: int
    height: int
    x: int = 0
    y: int = 0


# -- the kept restore token and the last outcome ------------------------------------------------
def state_file():
    return state_path(STATE_FILE)


def load_state() -> dict:
    """What the last portal session left: `restore_token` (a UUID, or absent), `outcome`
    (granted, not-persisted, refused, timeout) and `detail`. A file that is not ours to
    trust (not a small regular JSON object, a token that is no UUID) counts as empty."""
    path = state_file()
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    except OSError:
        return {}
    try:
        raw = os.read(fd, 4097)
    finally:
        os.close(fd)
    try:
        data = json.loads(raw) if len(raw) <= 4096 else None
    except ValueError:
        data = None
    if not isinstance(data, dict):
        log.warning("ignoring %s: not a JSON object of the host's", path)
        return {}
    token = data.get("restore_token")
    if token is not None and not (isinstance(token, str) and _UUID.match(token)):
        log.warning("ignoring the restore token in %s: not a UUID", path)
        data.pop("restore_token")
    return data


def save_state(**fields) -> None:
    """Replace the kept state (0600, atomic)."""
    ensure_state_dir()
    fields["at"] = int(time.time())
    atomic_write(state_file(), json.dumps(fields, sort_keys=True) + "\n", mode=0o600)


# -- D-Bus ----------------------------------------------------------------------------------
def _connect(bus_address: str | None, timeout: float) -> DBusConnection:
    return sessionbus.connect(bus_address, timeout, PortalError, "the desktop portal",
                              enable_fds=True)  # fmt: skip


def _call(conn: DBusConnection, msg, timeout: float, doing: str) -> tuple:
    return sessionbus.call(conn, msg, timeout, doing, PortalError, ended_too=True)


def _version(conn: DBusConnection, timeout: float) -> int:
    """The ScreenCast interface's version, after checking the portal and the interface are
    there (one PortalError for each absence)."""
    (owned,) = _call(conn, new_method_call(_BUS, "NameHasOwner", "s", (PORTAL,)), timeout,
                     f"asking the bus for {PORTAL}")  # fmt: skip
    if not owned:
        # Not started: say whether the bus could start it, but do not (a probe starts nothing).
        (names,) = _call(conn, new_method_call(_BUS, "ListActivatableNames"), timeout,
                         "asking the bus for its activatable names")  # fmt: skip
        how = (
            "it is installed and the bus can start it: any portal client, or `systemctl --user "
            "start xdg-desktop-portal`, starts it"
            if PORTAL in names
            else "xdg-desktop-portal is not installed for this session (Debian package "
            "xdg-desktop-portal, and a backend for the desktop)"
        )
        raise PortalError(f"{PORTAL} is not running on the session bus: {how}")
    props = DBusAddress(_PATH, PORTAL, "org.freedesktop.DBus.Properties")
    try:
        msg = new_method_call(props, "Get", "ss", (SCREENCAST, "version"))
        ((_sig, version),) = unwrap_msg(conn.send_and_get_reply(msg, timeout=timeout))
    except DBusErrorResponse as exc:
        raise PortalError(
            f"the desktop portal has no ScreenCast interface ({exc.name}): no portal backend "
            "for this desktop offers screen casting (wlroots: xdg-desktop-portal-wlr; GNOME: "
            "xdg-desktop-portal-gnome; KDE: xdg-desktop-portal-kde)"
        ) from exc
    except TimeoutError as exc:
        raise PortalError(f"the desktop portal did not answer in {timeout:g} s") from exc
    if not isinstance(version, int):
        raise PortalError(f"the desktop portal's ScreenCast version is {version!r}, not a number")
    return version


def _property(conn: DBusConnection, name: str, timeout: float) -> int:
    props = DBusAddress(_PATH, PORTAL, "org.freedesktop.DBus.Properties")
    msg = new_method_call(props, "Get", "ss", (SCREENCAST, name))
    ((_sig, value),) = _call(conn, msg, timeout, f"reading the portal's {name}")
    if not isinstance(value, int):
        raise PortalError(f"the portal's ScreenCast {name} is {value!r}, not a number")
    return value


def probe(bus_address: str | None = None, timeout: float = 3.0) -> int:
    """The portal's ScreenCast version, or PortalError saying why there is none. Read-only:
    it creates no session and so shows no dialog."""
    conn = _connect(bus_address, timeout)
    try:
        return _version(conn, timeout)
    finally:
        conn.close()


class PortalScreenCast:
    """One portal ScreenCast session of one monitor. After the constructor returns, `streams`
    holds the PipeWire node(s) with their size, `restore_token` the token for the next session
    (None when the portal granted no persistence), `restored` whether the kept token was used,
    and `open_remote()` gives the PipeWire remote (an fd) that can read them.

    `consent_timeout` bounds the wait for the person's answer to the portal's dialog.
    `keep_token`: read the kept token and store the new one (the host does; a probe does not).
    """

    def __init__(
        self,
        *,
        bus_address: str | None = None,
        timeout: float = 5.0,
        consent_timeout: float = CONSENT_TIMEOUT_S,
        cursor_mode: int = CURSOR_EMBEDDED,
        keep_token: bool = True,
    ):
        self.streams: list[Stream] = []
        self.session_handle: str | None = None
        self.version = 0
        self.token_sent: str | None = None
        self.restore_token: str | None = None
        self.restored = False
        self.cursor_mode = cursor_mode
        self._timeout, self._consent_timeout = timeout, consent_timeout
        self._keep = keep_token
        self._ended: str | None = None
        self._watch: list = []
        self._conn = _connect(bus_address, timeout)
        # The path part of request and session handles: our unique name, ':' dropped and
        # '.' as '_' (the portal's documented rule).
        self._sender = self._conn.unique_name.lstrip(":").replace(".", "_")
        try:
            self._start(cursor_mode)
        except BaseException:
            self.close()
            raise

    @property
    def stream(self) -> Stream:
        return self.streams[0]

    def _request(self, method: str, signature: str, args: tuple, options: dict,
                 wait: float, doing: str) -> dict:  # fmt: skip
        """Call `method` as a portal Request and wait up to `wait` for its Response: the
        results on success (response 0), PortalRefused on 1, PortalError on 2 or a timeout."""
        conn = self._conn
        token = "host" + secrets.token_hex(8)
        handle = f"{_PATH}/request/{self._sender}/{token}"
        rule = MatchRule(type="signal", interface=_REQUEST_IF, member="Response", path=handle)
        _call(conn, new_method_call(_BUS, "AddMatch", "s", (rule.serialise(),)), self._timeout,
              "AddMatch")  # fmt: skip
        sc = DBusAddress(_PATH, PORTAL, SCREENCAST)
        options = {**options, "handle_token": ("s", token)}
        with conn.filter(rule) as queue:
            msg = new_method_call(sc, method, signature, (*args, options))
            (got,) = _call(conn, msg, self._timeout, f"ScreenCast.{method}")
            if got != handle:
                raise PortalError(
                    f"the portal answered ScreenCast.{method} with request {got}, not {handle}: "
                    "a portal older than the handle_token rule (xdg-desktop-portal 0.9)"
                )
            try:
                signal = conn.recv_until_filtered(queue, timeout=wait)
            except TimeoutError:
                self._close_request(handle)
                if method == "CreateSession":
                    raise PortalError(f"the portal did not answer {doing} in {wait:g} s") from None
                raise PortalRefused(
                    f"nobody answered the screen-sharing request in {wait:g} s: the person at "
                    f"the desktop must answer the portal's dialog; {HOW_TO_CONSENT}",
                    "timeout",
                ) from None
            except (OSError, ValueError) as exc:
                raise PortalError(f"{doing}: the session bus connection ended ({exc})") from exc
        response, results = signal.body
        if response == 1:
            raise PortalRefused(
                f"screen sharing was refused at {doing} (the person cancelled the portal's "
                f"dialog, or its chooser picked nothing); to allow it, {HOW_TO_CONSENT}",
                "refused",
            )
        if response != 0:
            raise PortalError(
                f"the portal ended {doing} without success (response {response}): its backend "
                "failed; its log says why (xdg-desktop-portal-wlr 0.7 fails here on a "
                "compositor whose screencopy offers no dmabuf, i.e. software rendering)"
            )
        return {k: v[1] for k, v in results.items()}

    def _close_request(self, handle: str) -> None:
        req = DBusAddress(handle, PORTAL, _REQUEST_IF)
        try:
            self._conn.send_and_get_reply(new_method_call(req, "Close"), timeout=self._timeout)
        except (OSError, TimeoutError, ValueError, DBusErrorResponse):
            pass  # already answered or gone

    def _start(self, cursor_mode: int) -> None:
        self.version = _version(self._conn, self._timeout)
        if not _property(self._conn, "AvailableSourceTypes", self._timeout) & SOURCE_MONITOR:
            raise PortalError("the desktop portal's ScreenCast offers no monitor to share")
        cursors = _property(self._conn, "AvailableCursorModes", self._timeout)
        if not cursors & cursor_mode:
            # A cursor the backend cannot draw into the picture: the screen without it
            # (the client still has its own) rather than no screen.
            log.info("the portal cannot %s the cursor (modes %d): it is left out",
                     "embed" if cursor_mode == CURSOR_EMBEDDED else "send", cursors)  # fmt: skip
            cursor_mode = CURSOR_HIDDEN
        self.cursor_mode = cursor_mode
        results = self._request(
            "CreateSession", "a{sv}", (),
            {"session_handle_token": ("s", "host" + secrets.token_hex(8))},
            self._timeout, "CreateSession",
        )  # fmt: skip
        handle = results.get("session_handle")
        if not isinstance(handle, str) or not handle.startswith(f"{_PATH}/session/"):
            raise PortalError(f"the portal's CreateSession gave no session handle ({handle!r})")
        self.session_handle = handle
        self._watch = watch_end(self._conn, _SESSION_IF, handle, PORTAL, self._timeout)
        options = {
            "types": ("u", SOURCE_MONITOR),
            "multiple": ("b", False),
            "cursor_mode": ("u", cursor_mode),
        }
        if self.version >= PERSIST_VERSION:
            options["persist_mode"] = ("u", PERSIST_PERSISTENT)
            kept = load_state().get("restore_token") if self._keep else None
            if kept:
                options["restore_token"] = ("s", kept)
                self.token_sent = kept
        self._request("SelectSources", "oa{sv}", (handle,), options, self._consent_timeout,
                      "SelectSources")  # fmt: skip
        results = self._request("Start", "osa{sv}", (handle, ""), {}, self._consent_timeout,
                                "Start")  # fmt: skip
        self.streams = _streams(results.get("streams"))
        token = results.get("restore_token")
        if token is not None and not (isinstance(token, str) and _UUID.match(token)):
            raise PortalError(f"the portal's restore token {token!r} is not a UUID")
        self.restore_token = token
        self.restored = bool(token) and token == self.token_sent

    def persistence(self) -> str:
        """A sentence on whether the consent given now is kept for the next session."""
        if self.version < PERSIST_VERSION:
            return (f"not kept: the portal's ScreenCast is version {self.version}; restore "
                    f"tokens need version {PERSIST_VERSION} (xdg-desktop-portal 1.12)")  # fmt: skip
        if self.restore_token:
            how = "the kept token was accepted" if self.restored else "a new token was kept"
            return f"kept until revoked ({how})"
        return (
            "not kept: the portal's backend granted no persistence, so the next session asks "
            "again (xdg-desktop-portal-wlr 0.7 persists only when started with "
            "XDPW_PERSIST_MODE=permanent)"
        )

    def remember(self) -> None:
        """Keep the outcome for the next session and for /capture/methods (not for probes)."""
        if not self._keep:
            return
        if self.restore_token:
            save_state(restore_token=self.restore_token, outcome="granted",
                       detail=self.persistence())  # fmt: skip
        else:
            save_state(outcome="not-persisted", detail=self.persistence())

    def open_remote(self) -> int:
        """A new fd on the PipeWire remote that sees this session's streams (the caller owns
        and closes it). Only this remote may read the nodes of a sandboxed app; for a host
        process it is the desktop user's PipeWire all the same."""
        if self._conn is None:
            raise PortalError("the portal session is closed")
        sc = DBusAddress(_PATH, PORTAL, SCREENCAST)
        msg = new_method_call(sc, "OpenPipeWireRemote", "oa{sv}", (self.session_handle, {}))
        (fd,) = _call(self._conn, msg, self._timeout, "ScreenCast.OpenPipeWireRemote")
        try:
            return fd.to_raw_fd()
        except AttributeError:
            raise PortalError(f"OpenPipeWireRemote gave no file descriptor ({fd!r})") from None

    def ended(self) -> str | None:
        """Why the stream has ended (the portal closed the session, left the bus, or the bus
        went away), or None while it runs. Never blocks."""
        if self._conn is None:
            return "closed"
        if self._ended is None:
            why = end_seen(self._conn, self._watch, "ScreenCast", who="the desktop portal")
            self._ended = why
        return self._ended

    def close(self) -> None:
        """Close the portal session (its streams end) and drop the connection; safe to call
        twice, and when the portal is already gone."""
        conn, self._conn = self._conn, None
        if conn is None:
            return
        try:
            if self.session_handle is not None:
                session = DBusAddress(self.session_handle, PORTAL, _SESSION_IF)
                conn.send_and_get_reply(new_method_call(session, "Close"), timeout=self._timeout)
        except (OSError, TimeoutError, ValueError, DBusErrorResponse):
            pass  # the portal or the bus went away: the session went with it
        finally:
            conn.close()


def _streams(raw) -> list[Stream]:
    """The Start response's streams, each checked: a node id and a positive size."""
    if not isinstance(raw, list) or not raw:
        raise PortalError("the portal's Start response has no streams")
    out = []
    for item in raw:
        try:
            node_id, props = item
            width, height = props["size"][1]
            x, y = props.get("position", ("(ii)", (0, 0)))[1]
        except (TypeError, ValueError, KeyError) as exc:
            raise PortalError(f"the portal's stream {item!r} is malformed ({exc})") from exc
        if not (isinstance(node_id, int) and node_id > 0 and width > 0 and height > 0):
            raise PortalError(f"the portal's stream {item!r} has no node or no size")
        out.append(Stream(node_id, width, height, x, y))
    return out
