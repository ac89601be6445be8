"""The fleet's event path in process, on a real Redis: the relay's frame parser and checks, the
buffer (exactly once, bounded, floors), the stream's id vector and replay, and who may read it.
No port is bound here; the relay against TLS members is in test_relay.py."""

from __future__ import annotations

import asyncio
import io
import json

import pytest

from access import tokens
from fleet import buffer, relay, stream

ADMIN_TOKEN = "1" * 64
PLUGIN_TOKEN = "2" * 64


def frames(text: bytes):
    return list(relay.FrameReader(io.BytesIO(text).readline).frames())


def test_frames_are_parsed_and_comments_skipped():
    got = frames(b': open\n\nid: 3\nevent: game.running\ndata: {"a":\ndata: 1}\n\nevent: dropped\n')
    assert got == [("3", "game.running", '{"a":\n1}')]
    got = frames(b'event: dropped\ndata: {"dropped":true}\n\n')
    assert got == [(None, "dropped", '{"dropped":true}')]


@pytest.mark.parametrize(
    "text, reason",
    [
        (b"not sse at all\n\n", "not an SSE field"),
        (b"data: " + b"x" * relay.MAX_LINE + b"\n\n", "longer than"),
        ((b"data: " + b"x" * 60000 + b"\n") * 5 + b"\n", "larger than"),
        (b"data: \xff\xfe\n\n", "UTF-8"),
    ],
)
def test_garbage_and_oversize_are_refused(text, reason):
    with pytest.raises(relay.Garbage, match=reason):
        frames(text)


def test_event_checks():
    data = json.dumps({"seq": 5, "kind": "game.running"})
    assert relay.check_event("5", "game.running", data, 4)[0] == 5
    for fid, kind, body, last in [
        (None, "game.running", data, 0),  # no id
        ("5", "game.exited", data, 0),  # kind not the data's
        ("6", "game.running", data, 0),  # id not the data's seq
        ("5", "game.running", data, 5),  # not rising
        ("5", "game.running", "[1]", 0),
        ("5", "game.running", "{nope", 0),
        ("5", "Game Running", data, 0),
    ]:
        with pytest.raises(relay.Garbage):
            relay.check_event(fid, kind, body, last)
    assert relay.check_event(None, "dropped", "", 9)[1] == "dropped"


def tagged(member: int, seq: int, kind: str = "game.running") -> tuple[int, str, str]:
    tag = relay.host_tag(member, f"m{member}", f"https://10.0.0.{member}:47990")
    return seq, kind, json.dumps({"seq": seq, "kind": kind, "host": tag})


def entries():
    return [
        (int(f[b"m"]), int(f[b"s"]), f[b"k"].decode())
        for _, f in buffer.redis_client.client().xrange(buffer.STREAM)
    ]


def test_append_is_exactly_once_and_the_cursor_moves_with_it(redis_db):
    assert buffer.cursor(3) is None
    assert buffer.append(3, 0, [tagged(3, 1), tagged(3, 2)]) == 2
    # A relay that died after appending resumes from an older point: nothing twice.
    assert buffer.append(3, 0, [tagged(3, 1), tagged(3, 2), tagged(3, 3)]) == 3
    assert buffer.append(3, 0, [(-1, "dropped", buffer.dropped_data({"id": 3}))]) == 3
    assert entries() == [(3, 1, "game.running"), (3, 2, "game.running"),
                         (3, 3, "game.running"), (3, 3, "dropped")]  # fmt: skip
    assert buffer.cursor(3) == 3


def test_the_buffer_is_bounded_and_floors_rise_with_the_trim(redis_db, monkeypatch):
    monkeypatch.setattr(buffer, "MAX_EVENTS", 50)
    for seq in range(1, 201):
        buffer.append(1, 0, [tagged(1, seq)])
        buffer.append(2, 10, [tagged(2, seq)])
    assert buffer.length() == 50
    client = buffer.redis_client.client()
    floors = {int(k): int(v) for k, v in client.hgetall(buffer.FLOORS).items()}
    kept = entries()
    for member in (1, 2):
        lowest = min(s for m, s, _ in kept if m == member)
        assert floors[member] == lowest - 1  # everything above the floor is still there


def run_stream(vector, limit: int, keepalive: str = "0.2") -> list[bytes]:
    """The stream's frames (after the open comment) until `limit` event frames or a keep-alive."""

    async def go():
        out = []
        gen = stream._stream(vector, None, stream._Slot())
        async for chunk in gen:
            if chunk == stream.sse.OPEN_FRAME:
                continue
            if chunk == stream.sse.KEEPALIVE_FRAME:
                break
            out += [f + b"\n\n" for f in chunk.split(b"\n\n") if f]
            if len(out) >= limit:
                break
        await gen.aclose()
        return out

    return asyncio.run(go())


def parse(frame: bytes) -> dict:
    out = {}
    for line in frame.decode().splitlines():
        if line:
            key, _, value = line.partition(": ")
            out[key] = value
    return out


def test_stream_replays_after_a_vector_and_resumes_exactly(redis_db, monkeypatch):
    monkeypatch.setenv("HOST_SSE_KEEPALIVE_S", "0.2")
    for seq in (5, 6, 7):
        buffer.append(1, 4, [tagged(1, seq)])
    for seq in (40, 41):
        buffer.append(2, 39, [tagged(2, seq)])
    buffer.append(1, 4, [tagged(1, 8)])
    got = [parse(f) for f in run_stream(None, 10)]
    ids = [f["id"] for f in got]
    assert ids == ["1:5", "1:6", "1:7", "1:7,2:40", "1:7,2:41", "1:8,2:41"]
    assert json.loads(got[3]["data"])["host"] == {"id": 2, "name": "m2",
                                                  "url": "https://10.0.0.2:47990"}  # fmt: skip
    # Resume from the middle: exactly what came after, per member.
    rest = [parse(f)["id"] for f in run_stream(stream.parse_vector("1:6,2:40"), 10)]
    assert rest == ["1:7,2:40", "1:7,2:41", "1:8,2:41"]
    # An unparsable id is ignored: the whole buffer.
    assert len(run_stream(stream.parse_vector("1:6;2:40"), 10)) == 6


def test_a_resume_below_the_floor_gets_a_tagged_dropped(redis_db, monkeypatch):
    monkeypatch.setenv("HOST_SSE_KEEPALIVE_S", "0.2")
    buffer.set_host(1, relay.host_tag(1, "m1", "https://10.0.0.1:47990"))
    for seq in (50, 51):
        buffer.append(1, 49, [tagged(1, seq)])
    got = [parse(f) for f in run_stream({1: 20}, 10)]
    assert got[0]["event"] == "dropped" and "id" not in got[0]
    assert json.loads(got[0]["data"])["host"]["name"] == "m1"
    assert [f["id"] for f in got[1:]] == ["1:50", "1:51"]
    assert [parse(f)["id"] for f in run_stream({1: 49}, 10)] == ["1:50", "1:51"]


def test_vector_ids_are_parsed_strictly():
    assert stream.parse_vector("3:120,5:88") == {3: 120, 5: 88}
    too_long = ",".join(f"{i}:1" for i in range(stream.MAX_MEMBERS + 1))
    for bad in ("", "3", "3:", ":1", "3:1,3:2", "3:1, 5:2", "3:-1", "a:1", "3:" + "9" * 20,
                too_long):  # fmt: skip
        assert stream.parse_vector(bad) is None, bad
    assert stream.format_vector({5: 88, 3: 120}) == "3:120,5:88"


@pytest.fixture
def token_env(monkeypatch):
    monkeypatch.setenv("HOST_MGMT_TOKEN", ADMIN_TOKEN)
    monkeypatch.setenv("HOST_PLUGIN_TOKEN", PLUGIN_TOKEN)
    tokens._cache.clear()
    yield
    tokens._cache.clear()


@pytest.mark.django_db
def test_only_the_operator_may_read_the_fleet_stream(token_env, redis_db, async_rf):
    def answer(auth):
        request = async_rf.get("/api/v1/fleet/events", headers={"Authorization": auth or ""})
        return asyncio.run(stream.fleet_events_view(request))

    assert answer(None).status_code == 401
    assert answer(f"Bearer {'3' * 64}").status_code == 401
    refused = answer(f"Bearer {PLUGIN_TOKEN}")
    assert refused.status_code == 403 and PLUGIN_TOKEN not in refused.content.decode()
    ok = answer(f"Bearer {ADMIN_TOKEN}")
    assert ok.status_code == 200 and ok["Content-Type"] == "text/event-stream"
    ok.streaming_content  # noqa: B018 - the generator is released with the response
