"""The web port's listening socket, opened once by the supervisor and shared by every daphne
process (`HOST_WEB_PROCESSES` > 1).

The supervisor binds before any daphne starts and holds the socket for the host's life, so a
daphne killed or restarted never unbinds the port, and the connections waiting in the one
accept queue go to whichever process accepts next (a dead one strands none, as it would with
SO_REUSEPORT's per-socket queues). Each daphne adopts the inherited descriptor and wraps it in
TLS itself (hostmgmt/daphne_main.py), with the context its `ssl:` endpoint builds today.
"""

from __future__ import annotations

import os
import socket

# The descriptor number a daphne child finds its listening socket under.
FD_ENV = "HOST_WEB_FD"
# Twisted's `ssl:` endpoint listens with a backlog of 50: the shared socket keeps it.
BACKLOG = 50
MAX_PROCESSES = 4


def default_processes() -> int:
    return max(1, min(MAX_PROCESSES, os.cpu_count() or 1))


def processes_from(raw: str) -> int:
    """`HOST_WEB_PROCESSES`: 1..4, empty for the default (the number of cores, at most 4)."""
    raw = raw.strip()
    if not raw:
        return default_processes()
    try:
        value = int(raw)
    except ValueError:
        raise ValueError(f"HOST_WEB_PROCESSES must be an integer 1-4, got {raw!r}") from None
    if not 1 <= value <= MAX_PROCESSES:
        raise ValueError(f"HOST_WEB_PROCESSES must be an integer 1-4, got {raw!r}")
    return value


def open_listener(bind: str, port: int) -> socket.socket:
    """Bound and listening, as Twisted's TCP port would be (SO_REUSEADDR, the bind address's
    own family, `::` left dual-stack as the kernel defaults it). Inheritable by `pass_fds`."""
    family, kind, proto, _, address = socket.getaddrinfo(
        bind, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
    )[0]
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
        sock.listen(BACKLOG)
    except OSError:
        sock.close()
        raise
    return sock


def adopted_family(fd: int) -> socket.AddressFamily:
    """The address family of an inherited listening socket (the descriptor stays open)."""
    probe = socket.socket(fileno=os.dup(fd))
    try:
        return probe.family
    finally:
        probe.close()
