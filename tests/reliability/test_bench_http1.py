"""The load generators' HTTP/1.1 pool (bench/http1.py) against a real keep-alive server that,
like daphne, drops connections left idle: the soak counted such a drop as a host error
(`IncompleteReadError` in its third window, after the server's 60 s idle timeout)."""

from __future__ import annotations

import asyncio

import pytest

from bench.http1 import Pool

OK = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"


class Server:
    """Answers each request with OK; `idle_s` closes a connection idle that long; with
    `drop_next`, the next request on a connection that has served one is met with a close."""

    def __init__(self, idle_s: float | None = None) -> None:
        self.idle_s = idle_s
        self.drop_next = False
        self.connections = 0

    async def handle(self, reader, writer) -> None:
        self.connections += 1
        served = 0
        try:
            while True:
                try:
                    head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), self.idle_s)
                except (TimeoutError, asyncio.IncompleteReadError):
                    return
                length = next((int(line.split(b":")[1]) for line in head.split(b"\r\n")
                               if line.lower().startswith(b"content-length:")), 0)  # fmt: skip
                await reader.readexactly(length)
                if self.drop_next and served:
                    self.drop_next = False
                    return
                writer.write(OK)
                served += 1
        finally:
            writer.close()


async def serve(server: Server):
    srv = await asyncio.start_server(server.handle, "127.0.0.1", 0)
    return srv, srv.sockets[0].getsockname()[1]


def test_connections_the_server_closed_while_idle_are_not_reused():
    async def main():
        server = Server(idle_s=0.2)
        srv, port = await serve(server)
        pool = Pool(f"http://127.0.0.1:{port}", "", size=3)
        raw = pool.build("GET", "/", {})
        await pool.warm(raw)
        assert server.connections == 3
        await asyncio.sleep(0.5)  # every pooled connection is closed by the server
        results = [await pool.request(raw) for _ in range(3)]
        pool.close()
        srv.close()
        return server.connections, [r.status for r in results]

    connections, statuses = asyncio.run(main())
    assert statuses == [200, 200, 200]
    assert connections == 4  # one new connection, reused afterwards


def test_a_close_that_crosses_a_request_retries_only_idempotent_ones():
    async def main():
        server = Server()
        srv, port = await serve(server)
        pool = Pool(f"http://127.0.0.1:{port}", "", size=1)
        get = pool.build("GET", "/", {})
        await pool.request(get)
        server.drop_next = True
        retried = await pool.request(get)  # its connection closes unanswered: retried
        server.drop_next = True
        with pytest.raises(asyncio.IncompleteReadError):
            await pool.request(pool.build("POST", "/", {}, b"x"))  # never sent twice
        after = await pool.request(get)
        pool.close()
        srv.close()
        return retried.status, after.status, pool.open

    retried, after, still_open = asyncio.run(main())
    assert (retried, after) == (200, 200)
    assert still_open == 1
