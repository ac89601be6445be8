"""Events emitted while Redis is away: kept in order, spooled to disk, delivered when it is back.

Why it looks like this:
- `seq` is stamped by Redis at delivery (the bus's Lua script), so ring order == seq order ==
  publish order stays true and a seq is never reused; the event keeps the `ts_ms` of its emit.
- Per process, in memory, bounded (`HOST_EVENTS_BUFFER_MAX`). Past the bound newer events are
  dropped and one `dropped` marker takes their place in the order, so subscribers learn that
  they must resync from the REST snapshots (the spec's `dropped`).
- Each kept event is appended to a spool file in `<state>/events-spool/` and fdatasync'ed
  before `emit` returns, so a process that dies during the outage loses nothing. A live
  process holds an flock on its spool; a spool whose lock can be taken is an orphan, and
  whoever sees it first when Redis answers (any process's flusher, the supervisor's periodic
  job) delivers it. Delivered entries get a `done` line; every kept event carries an id the
  Lua script remembers for a day, so a crash between delivery and the `done` line does not
  deliver it twice.
- One flusher thread per outbox retries every RETRY_S and never runs on the caller's thread:
  `emit` does no more than a locked append and one fdatasync during an outage.
- Keyed by Redis URL and state dir: an outbox only ever delivers to the Redis it was kept for
  (tests point the process at other servers).
"""

from __future__ import annotations

import fcntl
import json
import logging
import os
import secrets
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from hooks import conf
from hooks.event_kinds import DROPPED, SCHEMA_VERSION

log = logging.getLogger("hooks.events")

SPOOL_DIR = "events-spool"
SPOOL_SUFFIX = ".spool"
RETRY_S = 0.2


@dataclass
class Entry:
    eid: str
    kind: str
    suffix: str  # the event document after `{"seq":` (ts_ms taken at emit)

    def line(self) -> bytes:
        return (json.dumps({"e": self.eid, "k": self.kind, "s": self.suffix}) + "\n").encode()


def marker_entry() -> Entry:
    ts_ms = int(time.time() * 1000)
    suffix = f',"ts_ms":{ts_ms},"schema":{SCHEMA_VERSION},"kind":"{DROPPED}","dropped":true}}'
    return Entry(secrets.token_hex(8), DROPPED, suffix)


# deliver(entry, url) publishes one entry on the Redis at `url`; raises when it cannot.
Deliver = Callable[[Entry, str], None]


class Outbox:
    """The kept events of this process for one Redis URL and state dir."""

    def __init__(self, url: str, spool_dir: Path, deliver: Deliver):
        self.url = url
        self.dir = spool_dir
        self.deliver = deliver
        self.lock = threading.Lock()
        self.entries: deque[Entry] = deque()
        self.events = 0  # kept events (markers not counted), against the bound
        self.lost = 0  # dropped past the bound during this outage
        self.fd: int | None = None
        self.path: Path | None = None
        self.flusher: threading.Thread | None = None
        self.wake = threading.Event()
        self.down_since: float | None = None
        self.delivered = 0

    def pending(self) -> bool:
        return bool(self.entries)

    def failed(self, exc: Exception) -> None:
        if self.down_since is None:
            self.down_since = time.monotonic()
            log.warning(
                "event bus: Redis unavailable (%s); events are kept (up to %d) and delivered "
                "when it is back",
                exc,
                conf.events_buffer_max(),
            )

    def add(self, kind: str, suffix: str) -> bool:
        """Keep one event; False when it was dropped past the bound. Never raises."""
        entry = Entry(secrets.token_hex(8), kind, suffix)
        with self.lock:
            if self.events >= conf.events_buffer_max():
                self.lost += 1
                if not self.entries or self.entries[-1].kind != DROPPED:
                    log.warning("event bus: outage buffer full; newer events are dropped")
                    entry = marker_entry()
                else:
                    return False
            else:
                self.events += 1
            self.entries.append(entry)
            self._spool(entry)
            self._ensure_flusher()
        return entry.kind != DROPPED

    def _spool(self, entry: Entry) -> None:
        try:
            if self.fd is None:
                self.fd, self.path = open_spool(self.dir, self.url)
            os.write(self.fd, entry.line())
            os.fdatasync(self.fd)
        except OSError as exc:  # disk full or read-only: the event is still kept in memory
            log.warning("event bus: could not spool a kept event (%s)", exc)

    def _ensure_flusher(self) -> None:
        if self.flusher is None or not self.flusher.is_alive():
            self.flusher = threading.Thread(target=self._run, name="events-outbox", daemon=True)
            self.flusher.start()

    def _run(self) -> None:
        while True:
            with self.lock:
                if not self.entries:
                    self._close_spool()
                    self.flusher = None
                    break
                entry = self.entries[0]
            try:
                self.deliver(entry, self.url)
            except Exception as exc:  # Redis still away: wait and retry
                self.failed(exc)
                self.wake.wait(RETRY_S)
                self.wake.clear()
                continue
            with self.lock:
                self.entries.popleft()
                if entry.kind != DROPPED:
                    self.events -= 1
                self.delivered += 1
                if self.fd is not None:
                    _write_done(self.fd, entry.eid)
        down = self.down_since
        self.down_since = None
        log.warning(
            "event bus: Redis is back; kept events delivered%s%s",
            f" after {time.monotonic() - down:.1f} s" if down is not None else "",
            f" ({self.lost} dropped past the bound)" if self.lost else "",
        )
        self.lost = 0
        try:
            recover_orphans(self.dir, self.url, self.deliver)
        except Exception:  # the supervisor's periodic job tries again
            log.exception("event bus: recovering orphaned spools failed")

    def _close_spool(self) -> None:
        if self.fd is None:
            return
        try:
            os.unlink(self.path)
        except OSError:
            pass
        os.close(self.fd)  # releases the flock
        self.fd = self.path = None

    def drop_after_fork(self) -> None:
        """In a forked child: the parent still owns these events and the spool's lock."""
        if self.fd is not None:
            try:
                os.close(self.fd)  # the parent's descriptor keeps the lock
            except OSError:
                pass


def open_spool(spool_dir: Path, url: str) -> tuple[int, Path]:
    """A new locked spool file; it gets its final name only once locked, so an orphan scanner
    never takes the lock of a file a live process is about to use."""
    spool_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
    name = f"{os.getpid()}-{secrets.token_hex(4)}"
    tmp = spool_dir / f".{name}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC, 0o600)
    fcntl.flock(fd, fcntl.LOCK_EX)
    os.write(fd, (json.dumps({"url": url, "pid": os.getpid()}) + "\n").encode())
    final = spool_dir / f"{name}{SPOOL_SUFFIX}"
    os.rename(tmp, final)
    dir_fd = os.open(spool_dir, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)
    return fd, final


def _write_done(fd: int, eid: str) -> None:
    # No fsync: a lost `done` line only means the id check in Redis catches the repeat.
    try:
        os.write(fd, (json.dumps({"done": eid}) + "\n").encode())
    except OSError:
        pass


def read_spool(raw: bytes) -> tuple[dict | None, list[Entry]]:
    """(header, entries not yet done) of a spool file; a torn last line is ignored."""
    header = None
    entries: list[Entry] = []
    done: set[str] = set()
    for number, line in enumerate(raw.split(b"\n")):
        try:
            doc = json.loads(line)
        except ValueError:
            continue
        if not isinstance(doc, dict):
            continue
        if number == 0 and "url" in doc:
            header = doc
        elif "done" in doc:
            done.add(str(doc["done"]))
        elif {"e", "k", "s"} <= doc.keys():
            entries.append(Entry(str(doc["e"]), str(doc["k"]), str(doc["s"])))
    return header, [e for e in entries if e.eid not in done]


def recover_orphans(spool_dir: Path, url: str, deliver: Deliver) -> int:
    """Deliver the spools of dead processes kept for `url`, in order, then remove them.
    Returns how many events were delivered. Raises when Redis is still away (the spool stays)."""
    try:
        names = sorted(os.listdir(spool_dir))
    except FileNotFoundError:
        return 0
    count = 0
    for name in names:
        if not name.endswith(SPOOL_SUFFIX):
            continue
        path = spool_dir / name
        try:
            fd = os.open(path, os.O_RDWR | os.O_APPEND | os.O_CLOEXEC)
        except FileNotFoundError:
            continue
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                continue  # its process is alive and delivers it itself
            if os.fstat(fd).st_nlink == 0:
                continue  # delivered and removed by someone else meanwhile
            raw = path.read_bytes()
            header, entries = read_spool(raw)
            if header is None or header.get("url") != url:
                continue
            if raw and not raw.endswith(b"\n"):
                os.write(fd, b"\n")  # end the torn line before appending done lines
            for entry in entries:
                deliver(entry, url)
                _write_done(fd, entry.eid)
                count += 1
            path.unlink()
            if entries:
                log.warning(
                    "event bus: delivered %d events kept by process %s, which died",
                    len(entries),
                    header.get("pid"),
                )
        finally:
            os.close(fd)
    return count


_lock = threading.Lock()
_boxes: dict[tuple[str, str], Outbox] = {}


def any_made() -> bool:
    """Whether this process ever kept an event (an outbox exists)."""
    return bool(_boxes)


def get(url: str, spool_dir: Path, deliver: Deliver) -> Outbox:
    key = (url, str(spool_dir))
    box = _boxes.get(key)
    if box is None:
        with _lock:
            box = _boxes.get(key)
            if box is None:
                box = _boxes[key] = Outbox(url, spool_dir, deliver)
    return box


def _after_fork_in_child() -> None:
    global _lock, _boxes
    for box in _boxes.values():
        box.drop_after_fork()
    _lock = threading.Lock()
    _boxes = {}


os.register_at_fork(after_in_child=_after_fork_in_child)
