"""A small JPEG of a live session's screen, for the console's "Now streaming" views.

Taken in the web process with the session's own capture backend (`session_display.
open_capture`) on the display the session holds, and only where one grab is cheap: an X
display (the host's Xvfb, an attached X desktop) or a wlroots output (screencopy). The
PipeWire backends (GNOME, KWin, the portal) are refused: a screencast of their own would
be a second stream (the portal would even ask the person again).

At most one capture per session per second, whichever web process asks: the first request
of a second takes the Redis lock (`SET NX PX`) and stores its answer (the picture, or why
there is none); the others get the last stored answer, waiting briefly for the first one.
"""

from __future__ import annotations

import json
import time

from common import redis_client
from displays import machine
from displays.models import VirtualDisplay
from streaming import live, session_display
from streaming.sessions import registry

MAX_WIDTH = 320
MIN_INTERVAL_S = 1.0
KEEP_S = 30  # a stored answer outlives its second only to serve the requests that queued
WAIT_S = 3.0  # a request that finds another taking the first picture waits this long
JPEG_QUALITY = 80
PIPEWIRE_BACKENDS = ("gnome", "mutter", "kwin", "portal")


class NoThumbnail(Exception):
    """No picture: `status` 404 (no such live session) or 409 (none can be taken now)."""

    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status, self.message = status, message


def _key(session_id: str) -> str:
    return f"{registry.PREFIX}:thumb:{session_id}"


def _lock_key(session_id: str) -> str:
    return f"{registry.PREFIX}:thumb-lock:{session_id}"


def size(width: int, height: int) -> tuple[int, int]:
    """The thumbnail's size for a screen of `width` x `height`: at most MAX_WIDTH wide, the
    screen's aspect kept."""
    width, height = max(int(width or 0), 1), max(int(height or 0), 1)
    w = min(MAX_WIDTH, width)
    return w, max(1, round(height * w / width))


def display_of(rec: dict) -> dict:
    """The display the session holds, as `displays.machine.info` describes it."""
    slot = rec.get("display_slot")
    row = VirtualDisplay.objects.filter(slot=slot).first() if isinstance(slot, int) else None
    if row is None:
        raise NoThumbnail(409, "the session has no display to take a picture of")
    return machine.info(row)


def grab(display: dict, width: int, height: int):
    """One frame of the display at `width` x `height` (BGRA or BGR), through the session's
    own kind of capture; NoThumbnail 409 when it takes none."""
    backend = display.get("backend") or ""
    if backend in PIPEWIRE_BACKENDS:
        raise NoThumbnail(409, f"no thumbnail of a {backend} display: its screencast "
                               "belongs to the session")  # fmt: skip
    if not display.get("running"):
        raise NoThumbnail(409, "the session's display is not running")
    capture = session_display.open_capture(display)
    try:
        frame = capture(width, height)
        if capture.failures:
            raise NoThumbnail(409, f"the capture of {capture.what} took no frame")
        return frame.copy()  # the X path may hand a view of memory that close unmaps
    finally:
        capture.close()


def encode(frame) -> bytes:
    # heavy: OpenCV, loaded only where a picture is taken
    import cv2

    if frame.ndim == 3 and frame.shape[2] == 4:
        frame = cv2.cvtColor(frame, cv2.COLOR_BGRA2BGR)
    ok, data = cv2.imencode(".jpg", frame, [cv2.IMWRITE_JPEG_QUALITY, JPEG_QUALITY])
    if not ok:
        raise NoThumbnail(409, "the frame could not be encoded")
    return data.tobytes()


def take(rec: dict) -> bytes:
    """A fresh JPEG of the session's screen (no throttle: `get` is the one callers use)."""
    width, height = size(rec.get("width") or 0, rec.get("height") or 0)
    return encode(grab(display_of(rec), width, height))


def _stored(r, session_id: str) -> dict | None:
    raw = r.hgetall(_key(session_id))
    if not raw or b"ts" not in raw:
        return None
    return {k.decode(): v for k, v in raw.items()}


def _store(r, session_id: str, fields: dict) -> None:
    pipe = r.pipeline()  # one transaction: a reader sees the old answer or the new, whole
    pipe.delete(_key(session_id))
    pipe.hset(_key(session_id), mapping=fields)
    pipe.expire(_key(session_id), KEEP_S)
    pipe.execute()


def _answer(stored: dict) -> bytes:
    if "jpeg" in stored:
        return stored["jpeg"]
    error = json.loads(stored.get("error") or b"{}")
    raise NoThumbnail(int(error.get("status", 409)), str(error.get("message", "no picture")))


def get(session_id: str) -> bytes:
    """The session's thumbnail, at most one capture a second (see the module doc).
    NoThumbnail 404 when no live session has that id; Redis errors propagate (503)."""
    session_id = str(session_id)
    if not live.ID_RE.match(session_id):
        raise NoThumbnail(404, "no live session with that id")
    rec = registry.get(session_id)
    if rec is None:
        raise NoThumbnail(404, "no live session with that id")
    r = redis_client.client()
    stored = _stored(r, session_id)
    if stored is not None and time.time() - float(stored["ts"]) < MIN_INTERVAL_S:
        return _answer(stored)
    if not r.set(_lock_key(session_id), b"1", nx=True, px=int(MIN_INTERVAL_S * 1000)):
        # Another request takes this second's picture: the last one, else wait for it.
        deadline = time.monotonic() + WAIT_S
        while stored is None and time.monotonic() < deadline:
            time.sleep(0.05)
            stored = _stored(r, session_id)
        if stored is None:
            raise NoThumbnail(409, "a picture is being taken; ask again in a second")
        return _answer(stored)
    now = time.time()
    try:
        data = take(rec)
    except NoThumbnail as exc:
        error = json.dumps({"status": exc.status, "message": exc.message})
        _store(r, session_id, {"ts": now, "error": error})
        raise
    _store(r, session_id, {"ts": now, "jpeg": data})
    return data
