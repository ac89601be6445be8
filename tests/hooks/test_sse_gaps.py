"""When an SSE stream gets `dropped` (hooks/sse.py `missed`), in particular across a Redis
restart, which wipes the ring and resumes seq at the persisted mark (`base`)."""

from __future__ import annotations

import pytest

from hooks import sse
from hooks.event_kinds import DROPPED


@pytest.fixture
def hub(monkeypatch):
    monkeypatch.setattr(sse.hub, "prev_run_last", None)
    return sse.hub


def test_same_run_cursor_rules(hub):
    # ring 100..200, counter at 200, this run started at 0
    assert not sse.missed(0, 100, 200, 0)  # no cursor: the whole ring
    assert not sse.missed(150, 100, 200, 0)
    assert not sse.missed(99, 100, 200, 0)  # next one is the ring's first
    assert sse.missed(98, 100, 200, 0)  # fell off the ring
    assert sse.missed(201, 100, 200, 0)  # ahead of the counter


def test_restart_seen_by_the_hub_is_not_a_gap(hub):
    hub.prev_run_last = 40  # the highest seq this hub saw before Redis restarted
    # the new run's counter started at 1024 and the ring still holds all of it
    assert not sse.missed(40, 1025, 1027, 1024)
    assert not sse.missed(40, 1025, 1024, 1024)  # nothing emitted since
    assert not sse.missed(40, 1, 0, None)  # the new run has not reserved yet
    assert sse.missed(39, 1025, 1027, 1024)  # seq 40 of the old run was never sent to it
    assert sse.missed(40, 1030, 2100, 1024)  # the new run's ring already wrapped


def test_restart_the_hub_did_not_see_is_a_gap(hub):
    # daphne itself restarted too: nothing says what the old run handed out last
    assert sse.missed(40, 1025, 1027, 1024)
    assert sse.missed(40, 1, 0, None)


def test_the_bus_dropped_marker_renders_as_the_spec_frame():
    assert sse.frame(7, DROPPED, '{"seq":7}') == sse.DROPPED_FRAME
    assert b"id:" not in sse.DROPPED_FRAME
    assert sse.wanted(("library.*",), DROPPED)  # whatever the stream's filter
    assert not sse.wanted(("library.*",), "host.started")
