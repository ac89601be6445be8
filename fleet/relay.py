"""One relay per member: the member's `GET /api/v1/events` held open over a pinned connection,
each event tagged with its host and appended to the fleet buffer (fleet/buffer.py).

- **Exact resume.** A relay asks for the events after the buffer's cursor for its member
  (`Last-Event-ID`); the cursor moves in the same Redis step that appends the event, and
  `Member.event_seq` (the durable copy the console shows) is written after that. A restart of
  this host, of the member, or an outage loses nothing the member still holds and repeats
  nothing. With no cursor (a new member, or this host's Redis wiped by a restart) it reads the
  member's whole replay ring, and the buffer's floor says from where it is complete.
- **The member's own gaps are forwarded.** A `dropped` frame from the member (its ring lost
  events, or it restarted and cannot vouch for its last events) goes into the buffer, tagged.
- **Bounded.** A line above `MAX_LINE` bytes, a frame above `MAX_FRAME`, anything that is not
  an SSE frame of the member's event shape (id = data's seq, rising; `event` = data's kind),
  or more than `RATE_BURST` events above `RATE_PER_S` cuts the connection, and the relay
  backs off. Others are not touched: each relay is its own thread with its own socket.
- **Backoff**: full jitter over 0.5 s doubling to `BACKOFF_MAX_S`, reset by a session that
  relayed something or lasted a minute.

Where relays run: in the supervisor (the `fleet-relays` periodic job calls `relays.sync()`
every 2 s), the one process of a host that exists exactly once and lives as long as the host;
a Celery worker or a daphne process may run several instances, each of which would relay
every member again. docs/fleet.md, "Events".
"""

from __future__ import annotations

import http.client
import json
import logging
import random
import re
import socket
import threading
import time

from fleet import buffer, member_tokens
from fleet.pinned import FingerprintMismatch, MemberClient, MemberError
from hooks.event_kinds import DROPPED

log = logging.getLogger("fleet.relay")

MAX_LINE = 64 * 1024
MAX_FRAME = 256 * 1024
READ_TIMEOUT_S = 45.0  # the member sends a keep-alive every 15 s
RATE_PER_S = 2000.0
RATE_BURST = 4000.0
BACKOFF_MIN_S = 0.5
BACKOFF_MAX_S = 30.0
STEADY_S = 60.0
DB_EVERY_S = 1.0  # Member.event_seq is written at most this often per member (and at the end)
SEQ_RE = re.compile(r"[0-9]{1,19}")
KIND_RE = re.compile(r"[a-z][a-z0-9_.]{0,63}")


class Garbage(MemberError):
    """The member sent something that is not its event stream; the message is safe to show."""


def host_tag(member_id: int, name: str, url: str) -> dict:
    return {"id": member_id, "name": name, "url": url}


class FrameReader:
    """SSE frames from a readline(limit) source, each line and frame bounded."""

    def __init__(self, readline):
        self.readline = readline

    def frames(self):
        """Yields (id or None, event or None, data) per frame; comments are skipped."""
        fid = kind = None
        data: list[str] = []
        size = 0
        while True:
            raw = self.readline(MAX_LINE + 1)
            if not raw:
                return  # the member closed the stream
            if len(raw) > MAX_LINE:
                raise Garbage(f"a line longer than {MAX_LINE} bytes")
            size += len(raw)
            if size > MAX_FRAME:
                raise Garbage(f"a frame larger than {MAX_FRAME} bytes")
            try:
                line = raw.decode("utf-8").rstrip("\r\n")
            except UnicodeDecodeError:
                raise Garbage("a line that is not UTF-8") from None
            if not line:
                if data or fid is not None or kind is not None:
                    yield fid, kind, "\n".join(data)
                fid = kind = None
                data, size = [], 0
                continue
            if line.startswith(":"):
                size -= len(raw)
                continue
            field, _, value = line.partition(":")
            value = value[1:] if value.startswith(" ") else value
            if field == "data":
                data.append(value)
            elif field == "id":
                fid = value
            elif field == "event":
                kind = value
            elif field != "retry":
                raise Garbage("a line that is not an SSE field")


def check_event(fid, kind, data: str, last: int) -> tuple[int, str, dict]:
    """(seq, kind, event) of an event frame, or Garbage. `dropped` frames have seq -1."""
    if kind == DROPPED:
        return -1, DROPPED, {}
    if fid is None or not SEQ_RE.fullmatch(fid) or kind is None or not KIND_RE.fullmatch(kind):
        raise Garbage("an event frame without a valid id and kind")
    try:
        event = json.loads(data)
    except ValueError:
        raise Garbage("an event whose data is not JSON") from None
    seq = int(fid)
    if not isinstance(event, dict) or event.get("seq") != seq or event.get("kind") != kind:
        raise Garbage("an event whose data does not match its id and kind")
    if seq <= last:
        raise Garbage("event seqs that do not rise")
    return seq, kind, event


class Relay:
    """One member's relay thread."""

    def __init__(self, member_id: int, url: str, fingerprint: str, name: str):
        self.member_id = member_id
        self.url = url
        self.fingerprint = fingerprint
        self.tag = host_tag(member_id, name, url)
        self._stop = threading.Event()
        self._conn: http.client.HTTPSConnection | None = None
        # The stream's socket: the connection lets go of it once the response is open.
        self._sock = None
        self._lock = threading.Lock()
        self.thread = threading.Thread(
            target=self._run, name=f"fleet-relay-{member_id}", daemon=True
        )
        self.failures = 0
        self.db_seq = None
        self.db_at = 0.0

    def key(self) -> tuple:
        return (self.url, self.fingerprint, self.tag["name"])

    def start(self) -> None:
        self.thread.start()

    def stop(self) -> None:
        self._stop.set()
        with self._lock:
            sock = self._sock
        if sock is not None:
            try:  # wakes the thread out of its read
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def join(self, timeout: float) -> None:
        self.thread.join(timeout)

    def _note(self, state: str, error: str = "", cursor: int | None = None) -> None:
        try:
            buffer.note_relay(
                self.member_id,
                {"state": state, "error": error, "cursor": cursor, "at": round(time.time(), 3)},
            )
        except Exception:  # Redis away: the state is only informative
            pass

    def _run(self) -> None:
        while not self._stop.is_set():
            started = time.monotonic()
            relayed = 0
            error = ""
            try:
                relayed = self._session()
            except FingerprintMismatch as exc:
                error = str(exc)
            except MemberError as exc:
                error = str(exc)
            except Exception as exc:  # Redis away, a database error: try again later
                error = f"relay failed: {type(exc).__name__}"
                log.warning("fleet relay %s: %s", self.member_id, error)
            finally:
                self._close()
                self._save_db(force=True)
            if self._stop.is_set():
                break
            if relayed or time.monotonic() - started >= STEADY_S:
                self.failures = 0
            self.failures += 1
            delay = min(BACKOFF_MAX_S, BACKOFF_MIN_S * 2 ** (self.failures - 1))
            delay = random.uniform(delay / 2, delay)
            if error:
                log.info("fleet relay %s: %s; again in %.1f s", self.member_id, error, delay)
            self._note("backing_off", error or "the member closed the stream")
            self._stop.wait(delay)
        self._note("stopped")

    def _close(self) -> None:
        with self._lock:
            conn, self._conn, sock, self._sock = self._conn, None, self._sock, None
        if conn is not None:
            conn.close()
        if sock is not None:
            sock.close()

    def _session(self) -> int:
        token = member_tokens.get(self.member_id)
        if not token:
            raise MemberError("no token is kept for this member")
        client = MemberClient(self.url, self.fingerprint, token, timeout=READ_TIMEOUT_S)
        start = buffer.cursor(self.member_id)
        buffer.set_host(self.member_id, self.tag)
        conn = client.connect()
        with self._lock:
            if self._stop.is_set():
                conn.close()
                return 0
            self._conn, self._sock = conn, conn.sock
        headers = client.headers({"Accept": "text/event-stream"})
        if start is not None and start > 0:
            headers["Last-Event-ID"] = str(start)
        try:
            conn.request("GET", "/api/v1/events", headers=headers)
            response = conn.getresponse()
        except (OSError, http.client.HTTPException) as exc:
            raise MemberError(f"event stream request failed: {type(exc).__name__}") from None
        if response.status != 200:
            raise MemberError(f"the member's event stream answered {response.status}")
        if not response.getheader("Content-Type", "").startswith("text/event-stream"):
            raise Garbage("the member's event stream is not text/event-stream")
        self._note("connected", cursor=start)
        last = start if start is not None else -1
        floor = start if start is not None else None
        tokens, filled = RATE_BURST, time.monotonic()
        relayed = 0
        try:
            for fid, kind, data in FrameReader(response.readline).frames():
                if self._stop.is_set():
                    break
                now = time.monotonic()
                tokens = min(RATE_BURST, tokens + (now - filled) * RATE_PER_S)
                filled = now
                if tokens < 1:
                    raise Garbage(f"more than {RATE_PER_S:.0f} events a second")
                tokens -= 1
                seq, kind, event = check_event(fid, kind, data, last)
                if kind == DROPPED:
                    tagged = buffer.dropped_data(self.tag)
                else:
                    event["host"] = self.tag
                    tagged = json.dumps(event, separators=(",", ":"))
                if floor is None:  # the ring from its start: complete above its first seq - 1
                    floor = max(0, seq - 1) if seq >= 0 else 0
                last = buffer.append(self.member_id, floor, [(seq, kind, tagged)])
                relayed += 1
                self._save_db()
        except (OSError, http.client.HTTPException) as exc:
            if self._stop.is_set():
                return relayed
            raise MemberError(f"event stream broke: {type(exc).__name__}") from None
        return relayed

    def _save_db(self, force: bool = False) -> None:
        """Member.event_seq follows the buffer's cursor (never the other way round)."""
        now = time.monotonic()
        if not force and now - self.db_at < DB_EVERY_S:
            return
        self.db_at = now
        try:
            seq = buffer.cursor(self.member_id)
        except Exception:
            return
        if seq is None or seq == self.db_seq:
            return
        from django.db import close_old_connections

        from fleet.models import Member

        try:
            Member.objects.filter(pk=self.member_id, event_seq__lt=seq).update(event_seq=seq)
            self.db_seq = seq
        except Exception as exc:
            log.warning("fleet relay %s: event_seq not saved (%s)", self.member_id, exc)
        finally:
            close_old_connections()


class Relays:
    """The relays of this process, one per member row; `sync()` starts and stops them."""

    def __init__(self):
        self.running: dict[int, Relay] = {}
        self._lock = threading.Lock()

    def sync(self) -> None:
        from django.db import connection

        from fleet.models import Member

        try:
            rows = list(Member.objects.values_list("id", "url", "fingerprint", "name"))
        finally:
            connection.close()
        wanted = {row[0]: row for row in rows}
        with self._lock:
            for member_id, relay in list(self.running.items()):
                row = wanted.get(member_id)
                if row is None or relay.key() != tuple(row[1:]):
                    relay.stop()
                    del self.running[member_id]
                    if row is None:
                        relay.join(2.0)
                        try:
                            buffer.forget(member_id)
                        except Exception:
                            pass
            for member_id, row in wanted.items():
                if member_id not in self.running:
                    relay = Relay(*row)
                    self.running[member_id] = relay
                    relay.start()

    def stop_all(self, timeout_s: float = 2.0) -> None:
        with self._lock:
            relays, self.running = list(self.running.values()), {}
        for relay in relays:
            relay.stop()
        deadline = time.monotonic() + timeout_s
        for relay in relays:
            relay.join(max(0.0, deadline - time.monotonic()))


relays = Relays()
