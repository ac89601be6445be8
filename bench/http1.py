"""A lean HTTP/1.1 keep-alive client for load generators.

httpx costs 2-3 ms of CPU a request; at 200 req/s on a 2-core box that is a third of a core
taken from the host being measured, and its event loop falls behind before the host does.
This client is only what a benchmark needs: persistent TLS connections, GET/POST/DELETE,
Content-Length and chunked bodies, and a pool that hands out idle connections.
"""

from __future__ import annotations

import asyncio
import base64
import json
import ssl

IDEMPOTENT = frozenset({b"GET", b"HEAD", b"PUT", b"DELETE", b"OPTIONS"})


class Response:
    __slots__ = ("status", "body")

    def __init__(self, status: int, body: bytes) -> None:
        self.status = status
        self.body = body

    def json(self):
        return json.loads(self.body)


class Connection:
    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer
        self.closed = False

    async def request(self, raw: bytes) -> Response:
        self.writer.write(raw)
        head = await self.reader.readuntil(b"\r\n\r\n")
        lines = head.split(b"\r\n")
        status = int(lines[0].split(b" ", 2)[1])
        length, chunked, close = None, False, False
        for line in lines[1:]:
            name, _, value = line.partition(b":")
            name = name.strip().lower()
            if name == b"content-length":
                length = int(value)
            elif name == b"transfer-encoding" and b"chunked" in value.lower():
                chunked = True
            elif name == b"connection" and value.strip().lower() == b"close":
                close = True
        if status in (204, 304) or 100 <= status < 200:
            body = b""
        elif chunked:
            chunks = bytearray()
            while size := int((await self.reader.readuntil(b"\r\n")).split(b";")[0], 16):
                chunks += await self.reader.readexactly(size)
                await self.reader.readexactly(2)
            await self.reader.readuntil(b"\r\n")  # the empty trailer
            body = bytes(chunks)
        elif length is not None:
            body = await self.reader.readexactly(length)
        else:  # no length: the body runs to the end of the connection
            body, close = await self.reader.read(), True
        if close:
            self.close()
        return Response(status, body)

    def close(self) -> None:
        self.closed = True
        self.writer.close()


class Pool:
    """Up to `size` keep-alive connections to one origin; a broken one is dropped, not reused."""

    def __init__(self, url: str, cafile: str, size: int) -> None:
        scheme, _, rest = url.partition("://")
        self.host, _, port = rest.rstrip("/").partition(":")
        self.port = int(port or (443 if scheme == "https" else 80))
        self.ctx = ssl.create_default_context(cafile=cafile) if scheme == "https" else None
        self.size = size
        self.idle: list[Connection] = []
        self.open = 0
        self.freed = asyncio.Condition()

    def build(self, method: str, path: str, headers: dict[str, str], body: bytes = b"") -> bytes:
        lines = [f"{method} {path} HTTP/1.1", f"Host: {self.host}:{self.port}"]
        lines += [f"{k}: {v}" for k, v in headers.items()]
        if body or method in ("POST", "PUT", "PATCH"):
            lines.append(f"Content-Length: {len(body)}")
        return ("\r\n".join(lines) + "\r\n\r\n").encode() + body

    async def request(self, raw: bytes) -> Response:
        """One exchange on an idle connection (or a new one). A reused connection that the
        server closed before answering anything (it drops keep-alive connections idle for a
        minute: the close can cross our request on the wire) is retried on another one
        when the request is idempotent, as HTTP clients do (RFC 9112 section 9.3.1)."""
        conn, reused = await self._take()
        try:
            response = await conn.request(raw)
        except BaseException as exc:
            await self._drop(conn)
            unanswered = isinstance(exc, ConnectionError) or (
                isinstance(exc, asyncio.IncompleteReadError) and not exc.partial
            )
            if reused and unanswered and raw.split(b" ", 1)[0] in IDEMPOTENT:
                return await self.request(raw)
            raise
        if conn.closed:
            await self._drop(conn)
        else:
            self.idle.append(conn)
            async with self.freed:
                self.freed.notify()
        return response

    async def _drop(self, conn: Connection) -> None:
        conn.close()
        self.open -= 1
        async with self.freed:
            self.freed.notify()

    async def _take(self) -> tuple[Connection, bool]:
        """(connection, reused): an idle one the server has not closed, else a new one."""
        while True:
            while self.idle:
                conn = self.idle.pop()
                if not (conn.reader.at_eof() or conn.writer.is_closing()):
                    return conn, True
                conn.close()  # the server closed it while it sat idle
                self.open -= 1
            if self.open < self.size:
                self.open += 1
                try:
                    reader, writer = await asyncio.open_connection(
                        self.host, self.port, ssl=self.ctx
                    )
                except BaseException:
                    self.open -= 1
                    raise
                return Connection(reader, writer), False
            async with self.freed:
                await self.freed.wait()

    async def warm(self, raw: bytes) -> None:
        """Open every connection of the pool (one request each), as a fleet of dashboards
        that is already connected: TLS handshakes are not part of the steady load."""
        await asyncio.gather(*(self.request(raw) for _ in range(self.size)))

    def close(self) -> None:
        for conn in self.idle:
            conn.close()
        self.idle.clear()


def basic_auth(user: str, password: str) -> str:
    return "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()


class EventStream:
    """A Server-Sent Events response read at the socket: each `data:` line comes with the
    time its bytes arrived (before any parsing), so a many-subscriber benchmark measures the
    host's delivery and not the client's per-stream parsing."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer
        self.status = 0
        self.chunked = False

    @classmethod
    async def open(cls, url: str, cafile: str, path: str, headers: dict[str, str]):
        pool = Pool(url, cafile, 1)
        reader, writer = await asyncio.open_connection(pool.host, pool.port, ssl=pool.ctx)
        stream = cls(reader, writer)
        writer.write(pool.build("GET", path, {**headers, "Accept": "text/event-stream"}))
        head = await reader.readuntil(b"\r\n\r\n")
        lines = head.split(b"\r\n")
        stream.status = int(lines[0].split(b" ", 2)[1])
        for line in lines[1:]:
            name, _, value = line.partition(b":")
            if name.strip().lower() == b"transfer-encoding" and b"chunked" in value.lower():
                stream.chunked = True
        return stream

    async def lines(self):
        """Yields (arrival time in ns, line) for every line of the event stream."""
        import time

        pending = b""
        while True:
            if self.chunked:
                size = int((await self.reader.readuntil(b"\r\n")).split(b";")[0], 16)
                if size == 0:
                    return
                data = await self.reader.readexactly(size + 2)
                data = data[:-2]
            else:
                data = await self.reader.read(65536)
                if not data:
                    return
            now = time.time_ns()
            pending += data
            *complete, pending = pending.split(b"\n")
            for line in complete:
                yield now, line.rstrip(b"\r")

    def close(self) -> None:
        self.writer.close()
