"""Per-stream history records and webhooks (`SessionCore.stream_began` / `stream_ended`): one
record and one `stream.start`/`stream.end` pair per stream, written when the client goes, with
that stream's own figures and the session's id; none for a session that never streamed. Real
database, real event bus on the tests' Redis; the webhook queue is read at `notify`."""

from __future__ import annotations

import pytest

from hooks import stream_webhooks
from streaming.models import SessionRecord
from streaming.sessions.lifecycle import SessionCore
from tests.support.events import emitted

# transaction: events inside an atomic block wait for a commit a test transaction never makes
pytestmark = [pytest.mark.django_db(transaction=True)]


class Counters:
    """A plane's counters (what `totals` reads): frames, bytes, encode ms, RTT ms."""

    def __init__(self):
        self.frames, self.bytes, self.enc, self.rtt = 0, 0, [], []

    def send(self, frames: int, nbytes: int, enc: float, rtt: float) -> None:
        self.frames += frames
        self.bytes += nbytes
        self.enc += [enc] * frames
        self.rtt.append(rtt)

    def totals(self):
        enc, rtt = (len(self.enc), sum(self.enc)), (len(self.rtt), sum(self.rtt))
        return self.frames, self.bytes, enc, rtt


@pytest.fixture
def hooks(monkeypatch):
    sent: list[tuple[str, dict]] = []
    monkeypatch.setattr(stream_webhooks, "notify", lambda ev, rec: sent.append((ev, rec)) or 1)
    return sent


def core(sid="0a1b2c3d") -> tuple[SessionCore, Counters]:
    c = SessionCore("compat", sid, {"name": "TV", "fingerprint": "ab" * 32}, 1280, 720, 60,
                    "7", "Probe", remote="10.0.0.5")  # fmt: skip
    counters = Counters()
    c.totals = counters.totals
    c.began()
    return c, counters


def test_each_stream_leaves_its_own_record_and_webhook_pair_at_once(redis_db, hooks):
    c, n = core()
    c.stream_began()
    n.send(60, 250_000, 3.0, 5.0)
    c.sample(2000, 5.0, 3.0)
    c.stream_ended()  # the client stopped; under `keep` the session goes on
    assert SessionRecord.objects.count() == 1, "the record must not wait for the session's end"
    assert [e for e, _ in hooks] == ["stream.start", "stream.end"]

    c.stream_began()  # a resume: a new stream
    n.send(30, 50_000, 9.0, 20.0)
    c.sample(400, 20.0, 9.0)
    c.sample(400, 20.0, 9.0)
    c.stream_ended()
    c.finish("cancel", deliberate=True)  # nothing open: no third record
    first, second = SessionRecord.objects.order_by("t_start", "id")
    assert [e for e, _ in hooks] == ["stream.start", "stream.end"] * 2
    assert {first.session_id, second.session_id} == {"0a1b2c3d"}
    # Each record has its own stream's figures, not the session's running totals.
    assert first.avg_encode_ms == 3.0 and first.avg_rtt_ms == 5.0
    assert second.avg_encode_ms == 9.0 and second.avg_rtt_ms == 20.0
    assert len(first.samples) == 1 and len(second.samples) == 2
    assert first.t_end <= second.t_start
    assert first.client_name == "TV" and first.app_name == "Probe" and first.plane == "compat"
    assert hooks[3][1]["session_id"] == "0a1b2c3d" and hooks[3][1]["avg_encode_ms"] == 9.0
    body = stream_webhooks.body_for(*hooks[3])
    assert b'"session_id":"0a1b2c3d"' in body
    kinds = [e["kind"] for e in emitted() if e["kind"].startswith(("stream.", "session."))]
    assert kinds == ["session.started", "stream.started", "stream.stopped", "stream.started",
                     "stream.stopped", "session.ended"]  # fmt: skip


def test_a_session_that_never_streamed_writes_no_record(redis_db, hooks):
    c, _ = core("00000001")
    c.finish("arm_timeout", deliberate=False)
    assert SessionRecord.objects.count() == 0 and hooks == []
    ended = emitted("session.ended")
    assert ended and ended[0]["reason"] == "arm_timeout"


def test_a_stream_open_at_the_end_is_recorded_once(redis_db, hooks):
    c, n = core("00000002")
    c.stream_began()
    c.stream_began()  # a second "first frame" of the same stream is not a new stream
    n.send(10, 10_000, 2.0, 1.0)
    c.finish("api", deliberate=True)
    c.finish("api", deliberate=True)
    assert SessionRecord.objects.count() == 1
    assert [e for e, _ in hooks] == ["stream.start", "stream.end"]


def test_refs_name_their_session(redis_db, hooks):
    c, _ = core("00000003")
    c.emit("client.connected")
    c.stream_began()
    c.stream_ended()
    client = emitted("client.connected")[0]["client"]
    stream = emitted("stream.started")[0]["stream"]
    session = emitted("session.started")[0]["session"]
    assert client["session_id"] == stream["session_id"] == session["id"] == "00000003"


class StoppingStream:
    """A compat StreamSession as `CompatSession.stop_stream` meets it: its video thread's
    last act, inside `stop()`, is `stream.stopped` (which writes the stream's record)."""

    def __init__(self, session, frames: int, nbytes: int):
        from compat.engine.launch import SessionStats

        self.session = session
        self.stats = SessionStats(frames_sent=frames, bytes_sent=nbytes)
        for _ in range(frames):
            self.stats.encode_ms.append(4.0)
        self.stats.rtt_ms.append(6)
        self.stop_reason = None

    def stop(self, reason):
        self.stop_reason = reason
        self.session.on_event("stream.stopped")


def test_a_compat_stream_stopped_by_the_host_is_recorded_with_its_own_figures(redis_db, hooks):
    """Found end to end: /cancel right after a resumed stream; the video thread reported the
    stop after the session had let go of the stream and before it folded its counters, and the
    record read zero frames."""
    from compat.session import CompatSession

    spec = {"id": "0000000c", "client": {"name": "TV", "fingerprint": "cd" * 32},
            "width": 640, "height": 360, "fps": 30, "app_id": 1, "app_name": "Probe"}  # fmt: skip
    s = CompatSession(spec)
    s.core.began()
    for frames in (30, 60):  # the launch's stream, then a resume's
        s.stream = StoppingStream(s, frames, frames * 1000)
        s.stream_started = False
        s.on_event("stream.started")
        s.stop_stream("host")
    first, second = SessionRecord.objects.order_by("t_start", "id")
    assert first.avg_encode_ms == second.avg_encode_ms == 4.0
    assert first.avg_bitrate_kbps > 0 and second.avg_bitrate_kbps > 0
    assert [r["avg_rtt_ms"] for e, r in hooks if e == "stream.end"] == [6.0, 6.0]
    assert s.totals()[0] == 90


def test_per_second_samples_are_bounded_and_the_tallies_cover_the_whole_stream(redis_db, hooks):
    """A stream of many hours keeps only the record's hour of samples in memory, while the
    encode/RTT tallies (the native plane's averages) still count every second."""
    c, _ = core("00000002")
    cap = c.samples.maxlen
    assert cap == 3600
    c.stream_began()
    for i in range(cap + 500):
        c.sample(1000, 10.0 + (i % 2), 4.0)
    assert len(c.samples) == cap  # the oldest 500 seconds left memory
    assert c.encode_tally == (cap + 500, 4.0 * (cap + 500))
    assert c.rtt_tally[0] == cap + 500 and c.rtt_tally[1] == pytest.approx(10.5 * (cap + 500))
    c.stream_ended()
    c.stream_began()  # a resume after a long stream: its record has only its own seconds
    for _ in range(3):
        c.sample(500, 20.0, None)
    c.stream_ended()
    first, second = SessionRecord.objects.order_by("t_start", "id")
    assert len(first.samples) == cap and first.samples[-1]["rtt_ms"] == 11.0
    assert [s["rtt_ms"] for s in second.samples] == [20.0, 20.0, 20.0]
    assert c.encode_tally[0] == cap + 500  # None is no sample


def test_a_compat_client_hears_the_same_disconnect_reason_as_a_browser(redis_db, hooks):
    """The host ending a compat session for a failure tells the client `error`, as the native
    plane does (`watch.DISCONNECTED`); the operator's end stays `quit`."""
    from compat.session import CompatSession

    for sid, reason, heard in (("0000000d", "display_lost", "error"), ("0000000e", "api", "quit")):
        spec = {"id": sid, "client": {"name": "TV", "fingerprint": "cd" * 32}, "width": 640,
                "height": 360, "fps": 30, "app_id": 1, "app_name": "Probe"}  # fmt: skip
        s = CompatSession(spec)
        s.core.began()
        s.stream = StoppingStream(s, 30, 30_000)
        s.on_event("client.connected")
        s.reason = reason
        s.stop_stream("host")
        gone = [e for e in emitted("client.disconnected") if e["client"]["session_id"] == sid]
        assert [e["reason"] for e in gone] == [heard]
