"""The fleet host's `GET /api/v1/fleet/events` read as a consumer would, in a thread."""

from __future__ import annotations

import json
import threading
import time

import httpx


class Reader:
    """One fleet stream read in a thread: its frames (dicts) as they come."""

    def __init__(self, host, last_id: str | None = None):
        self.frames: list[dict] = []
        self.host = host
        self.last_id = last_id
        self.done = threading.Event()
        self.status = None
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self):
        headers = {"Authorization": f"Bearer {self.host.mgmt_token}"}
        if self.last_id:
            headers["Last-Event-ID"] = self.last_id
        try:
            with (
                httpx.Client(
                    base_url=self.host.url,
                    verify=self.host.ssl_context(),
                    timeout=httpx.Timeout(30, read=60),
                ) as c,  # fmt: skip
                c.stream("GET", "/api/v1/fleet/events", headers=headers) as r,
            ):
                self.status = r.status_code
                frame: dict = {}
                for line in r.iter_lines():
                    if self.done.is_set():
                        return
                    if not line:
                        if "data" in frame:
                            self.frames.append(frame)
                        frame = {}
                    elif not line.startswith(":"):
                        key, _, value = line.partition(": ")
                        frame[key] = value
        except (httpx.HTTPError, OSError):
            pass

    def events(self, member_id: int) -> list[dict]:
        out = []
        for f in self.frames:
            data = json.loads(f["data"])
            if data.get("host", {}).get("id") == member_id:
                out.append({**data, "_event": f.get("event"), "_id": f.get("id")})
        return out

    def numbered(self, member_id: int) -> list[int]:
        return [e["n"] for e in self.events(member_id) if "n" in e]

    def wait(self, check, timeout=60.0):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if check():
                return
            time.sleep(0.1)
        raise AssertionError(f"timed out; frames: {self.frames[-10:]}")

    def close(self):
        self.done.set()
