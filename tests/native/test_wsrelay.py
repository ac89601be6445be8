"""The WebCodecs video relay at the Channels level: the project's real ASGI application
(`hostmgmt.asgi.application`) driven by Channels' communicators, the one session registry on
the tests' Redis, and a real Unix socket standing in for the peer's frame server.

Each auth rule of the relay has its test: the Origin must be this host, the token comes only
from the `token.` subprotocol and must name a live session, the session's socket must be
there, other paths are refused. Then the relay itself: frames byte-exact, oversized frames
and the session's end close the page's socket, the page leaving closes the peer's. HTTP goes
on through the body-size guard to Django.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from channels.testing import HttpCommunicator, WebsocketCommunicator

from native import wsrelay
from streaming.sessions import registry as live_sessions

HOST = b"host.lan:47990"
ORIGIN = b"https://host.lan:47990"
TOKEN = "k3y-0f-th3-s3ss10n"


@pytest.fixture
def app():
    from hostmgmt.asgi import application

    return application


@pytest.fixture
def registry(redis_db):
    """The one session registry, on the tests' Redis, empty."""
    return redis_db


def register(fp: str, record: dict) -> str:
    """A live native session record for device `fp`; its id."""
    sid = live_sessions.new_id()
    live_sessions.put({"id": sid, "plane": "native", "fingerprint": fp, **record})
    return sid


@pytest.fixture
def sock_dir():
    path = Path(tempfile.mkdtemp(prefix="wsr-"))  # short: AF_UNIX paths stop at 108 bytes
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def session(registry, sock_dir):
    """A live WebCodecs session (this process stands in for its peer); its socket path."""
    path = str(sock_dir / "peer.sock")
    register("fp-a", {"pid": os.getpid(), "ws_token": TOKEN, "ws_sock": path})
    return path


def communicator(app, path="/native/ws", origin=ORIGIN, host=HOST, token=TOKEN):
    headers = [(b"host", host)] + ([(b"origin", origin)] if origin is not None else [])
    protocols = ["hostmgmt.video"] + ([f"token.{token}"] if token is not None else [])
    return WebsocketCommunicator(app, path, headers=headers, subprotocols=protocols)


def frame(payload: bytes) -> bytes:
    return len(payload).to_bytes(wsrelay.LENGTH_SIZE, "little") + payload


async def serve(path: str, chunks: list[bytes], then_close: bool):
    """A frame server on `path`: writes `chunks` to the relay, then closes (the session ended)
    or waits for the relay to leave. Returns (server, event set when the relay left)."""
    left = asyncio.Event()

    async def client(reader, writer):
        for chunk in chunks:
            writer.write(chunk)
        await writer.drain()
        if not then_close:
            await reader.read()
            left.set()
        writer.close()

    server = await asyncio.start_unix_server(client, path=path)
    return server, left


def connect(comm) -> tuple:
    async def run():
        try:
            return await comm.connect(timeout=5)
        finally:
            await comm.wait(timeout=5)  # a refused socket's consumer has ended at once

    return asyncio.run(run())


# -- auth rules -------------------------------------------------------------------------------


def test_right_token_from_a_foreign_origin_is_refused(app, session):
    assert connect(communicator(app, origin=b"https://evil.example")) == (False, 4403)


def test_a_missing_origin_is_refused(app, session):
    assert connect(communicator(app, origin=None)) == (False, 4403)


def test_the_origin_must_name_the_same_port(app, session):
    assert connect(communicator(app, origin=b"https://host.lan:8443")) == (False, 4403)


def test_no_token_or_an_empty_one_is_refused(app, registry, sock_dir):
    # A WebRTC-mode session has no token: an empty one must not match it.
    register("fp-b", {"pid": os.getpid(), "ws_token": None, "ws_sock": None})
    assert connect(communicator(app, token=None)) == (False, 4403)
    assert connect(communicator(app, token="")) == (False, 4403)


def test_a_wrong_token_is_refused(app, session):
    assert connect(communicator(app, token="nope")) == (False, 4403)
    assert connect(communicator(app, token=TOKEN + "x")) == (False, 4403)


def test_a_token_in_the_url_is_not_read(app, session):
    comm = communicator(app, path=f"/native/ws?token={TOKEN}", token=None)
    assert connect(comm) == (False, 4403)


def test_the_token_of_an_ended_session_is_refused(app, registry, sock_dir):
    gone = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"],
        check=True,
        capture_output=True,
        text=True,
    )
    pid = int(gone.stdout)
    sid = register("fp-c", {"pid": pid, "ws_token": TOKEN, "ws_sock": str(sock_dir / "x")})
    assert connect(communicator(app)) == (False, 4403)
    assert registry.hget(live_sessions.LIVE, sid) is None  # and the dead record is dropped


def test_a_session_without_its_socket_is_gone(app, session):
    assert connect(communicator(app)) == (False, 4404)


def test_other_paths_are_refused_even_with_a_good_token(app, session):
    for path in ("/other/ws", "/native/ws/", "/native/wsx", "/"):
        assert connect(communicator(app, path=path)) == (False, 4404), path


def test_the_origin_is_checked_before_the_route(app, session):
    assert connect(communicator(app, path="/other/ws", origin=b"null")) == (False, 4403)


# -- the relay --------------------------------------------------------------------------------


def test_frames_are_relayed_byte_exact_and_the_session_end_closes_the_page(app, session):
    payloads = [b"\x01" + os.urandom(40000), b"\x00" + os.urandom(900), b"\x00"]

    async def run():
        server, _ = await serve(session, [frame(p) for p in payloads], then_close=True)
        comm = communicator(app)
        try:
            assert await comm.connect(timeout=5) == (True, "hostmgmt.video")
            await comm.send_to(bytes_data=b"ignored")  # the page sends nothing that matters
            got = [await comm.receive_from(timeout=5) for _ in payloads]
            closing = await comm.receive_output(timeout=5)
        finally:
            await comm.disconnect()
            server.close()
        return got, closing

    got, closing = asyncio.run(run())
    assert got == payloads
    assert closing == {"type": "websocket.close", "code": 1000}


def test_the_relay_uses_no_channel_layer_even_if_one_is_configured(app, session, settings):
    settings.CHANNEL_LAYERS = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}
    seen = []

    class Spy(wsrelay.VideoRelayConsumer):
        async def connect(self):
            seen.append(self.channel_layer)
            await super().connect()

    async def run():
        server, _ = await serve(session, [frame(b"x")], then_close=True)
        comm = WebsocketCommunicator(
            wsrelay.RelayTokenAuthMiddleware(Spy.as_asgi()),
            "/native/ws",
            subprotocols=["hostmgmt.video", f"token.{TOKEN}"],
        )
        try:
            assert (await comm.connect(timeout=5))[0]
            assert await comm.receive_from(timeout=5) == b"x"
        finally:
            await comm.disconnect()
            server.close()

    asyncio.run(run())
    assert seen == [None]


def test_an_oversized_frame_is_not_relayed(app, session):
    head = (wsrelay.MAX_FRAME + 1).to_bytes(wsrelay.LENGTH_SIZE, "little")

    async def run():
        server, _ = await serve(session, [frame(b"ok"), head + b"\x00" * 64], then_close=False)
        comm = communicator(app)
        try:
            assert (await comm.connect(timeout=5))[0]
            first = await comm.receive_from(timeout=5)
            closing = await comm.receive_output(timeout=5)
        finally:
            await comm.disconnect()
            server.close()
        return first, closing

    first, closing = asyncio.run(run())
    assert first == b"ok"
    assert closing == {"type": "websocket.close", "code": 1000}


def test_the_page_leaving_closes_the_peer_socket(app, session):
    async def run():
        server, left = await serve(session, [frame(b"a")], then_close=False)
        comm = communicator(app)
        try:
            assert (await comm.connect(timeout=5))[0]
            assert await comm.receive_from(timeout=5) == b"a"
            await comm.disconnect()
            await asyncio.wait_for(left.wait(), 5)
        finally:
            server.close()

    asyncio.run(run())


# -- HTTP keeps its guard -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("path", "body"),
    [
        ("/api/v1/host", {"error": "request body too large"}),
        ("/api/apps", {"status": False, "status_code": 413, "error": "request body too large"}),
    ],
)
def test_http_still_goes_through_the_body_limit(app, settings, path, body):
    too_big = str(settings.MGMT_MAX_REQUEST_BODY + 1).encode()
    comm = HttpCommunicator(app, "POST", path, headers=[(b"content-length", too_big)])
    response = asyncio.run(comm.get_response(timeout=5))
    assert response["status"] == 413
    assert json.loads(response["body"]) == body
