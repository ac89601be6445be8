"""When an SSE stream gets `dropped` (hooks/sse.py `missed`), in particular across a Redis
restart, which wipes the ring and resumes seq at the persisted mark (`base`); and what the hub
does with a live stream it writes to directly (`Subscriber`)."""

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


# -- the hub's direct writes to a live stream ------------------------------------------------


class _Peer:
    def __init__(self, unsent: int = 0):
        self.backlog = unsent

    def unsent(self) -> int:
        return self.backlog


def _live(peer=None, passes=lambda kind: kind != "stream.started"):
    written = []

    async def send(message):
        assert message["more_body"] is True
        written.append(message["body"])

    async def make():  # an asyncio.Event wants a running loop
        sub = sse.Subscriber(8, passes, peer or _Peer())
        sub.writer = send
        return sub

    return make, written


def test_a_live_stream_gets_each_later_event_once_and_only_those_its_filter_passes():
    import asyncio

    make, written = _live()

    async def run():
        sub = await make()
        sub.sent = 4  # what its replay and queue covered
        for seq, kind in ((3, "library.changed"), (5, "library.changed"), (5, "library.changed"),
                          (6, "stream.started"), (7, "host.stopping")):  # fmt: skip
            await sub.deliver([_item(seq, kind)], 0.0)
        return sub

    sub = asyncio.run(run())
    assert written == [b"5;", b"7;"] and sub.sent == 7
    assert not sub.items  # nothing queued: the hub wrote them


def _item(seq: int, kind: str = "library.changed"):
    data = f"{seq};".encode()
    return (seq, kind, data, sse.body(data))


def test_a_batch_the_hub_took_at_once_is_one_write_of_what_the_stream_wants():
    import asyncio

    make, written = _live()

    async def run():
        sub = await make()
        sub.sent = 10
        batch = [_item(9), _item(11), _item(12, "stream.started"), _item(13), _item(14)]
        await sub.deliver(batch, 0.0)
        await sub.deliver([_item(13), _item(14)], 0.0)  # already written: nothing
        return sub

    sub = asyncio.run(run())
    assert written == [b"11;13;14;"] and sub.sent == 14


def test_a_live_stream_whose_socket_backs_up_is_taken_off_the_hub_and_cut_off():
    import asyncio

    from hooks import conf

    peer = _Peer(conf.SSE_MAX_UNSENT_BYTES + 1)
    make, written = _live(peer)

    async def run():
        sub = await make()
        await sub.deliver([_item(1)], 0.0)
        return sub

    sub = asyncio.run(run())
    assert written == [b"1;"] and sub.stalled and sub.writer is None and sub.wake.is_set()


def test_a_backlog_that_grows_later_is_caught_within_the_check_interval():
    import asyncio

    from hooks import conf
    from hooks.sse import BACKLOG_CHECK_EVERY

    peer = _Peer(0)
    make, written = _live(peer)

    async def run():
        sub = await make()
        await sub.deliver([_item(1)], 0.0)
        peer.backlog = conf.SSE_MAX_UNSENT_BYTES + 1  # the consumer stops reading
        seq = 1
        while not sub.stalled and seq < 1 + 2 * BACKLOG_CHECK_EVERY:
            seq += 1
            await sub.deliver([_item(seq)], 0.0)
        return sub, seq

    sub, seq = asyncio.run(run())
    assert sub.stalled and sub.writer is None
    assert seq - 1 <= BACKLOG_CHECK_EVERY, f"cut off only after {seq - 1} more writes"


def test_a_failed_write_ends_the_stream_and_the_hub_stops_writing_to_it():
    import asyncio

    async def gone(message):
        raise ConnectionError("peer went away")

    async def run():
        sub = sse.Subscriber(8, peer=_Peer())
        sub.writer = gone
        await sub.deliver([_item(1)], 0.0)
        return sub

    sub = asyncio.run(run())
    assert sub.broken and sub.writer is None


def test_a_lost_hub_puts_a_live_stream_back_on_its_queue():
    import asyncio

    make, written = _live()

    async def run():
        sub = await make()
        sub.lost()
        sub.offer((9, "library.changed", b"9", None))
        return sub

    sub = asyncio.run(run())
    assert sub.resync and sub.writer is None and written == []
    assert sub.drain() == b"9" and sub.sent == 9
