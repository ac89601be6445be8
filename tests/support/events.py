"""What the event bus published, read back the way a subscriber would: from the replay ring in
the tests' Redis (the `redis_db` fixture points the host's accessor at it and empties it, so the
ring holds only what this test's process emitted)."""

from __future__ import annotations

from hooks.events import ring_events


def emitted(kind: str | None = None) -> list[dict]:
    """The events in the ring, oldest first; only those of `kind` when given.

    Needs the `redis_db` fixture in the calling test: without it the host's accessor points at
    a socket with no server behind it, the bus drops every event and this raises.
    """
    return [e for e in ring_events() if kind is None or e["kind"] == kind]
