"""Bare ASGI apps served the way the host serves its own: the floor a bench divides by.

`start(host, app, processes)` runs `processes` daphnes through the host's daphne entry point
(hostmgmt.daphne_main: its body limits and GIL interval) on the host's certificate and Redis,
all listening on one TLS port with SO_REUSEPORT, so the kernel spreads connections over them as
it would over a host running that many web processes.

`python bench/bare_daphne.py <daphne arguments>` is that entry point with SO_REUSEPORT set on
every listening socket (Twisted's TCP port offers no option for it).
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def start(host, app: str, processes: int = 1) -> tuple[int, list[subprocess.Popen]]:
    """(port, daphne processes) serving the ASGI `app` ("module:attr") beside `host`."""
    from tests.support.livehost import free_base_port

    env = {k: v for k, v in os.environ.items() if not k.startswith("HOST_")}
    env.update(
        HOST_STATE_DIR=str(host.state_dir),
        HOST_PORT=str(host.base_port),
        REDIS_URL=f"unix://{host.state_dir / 'redis.sock'}",
        DJANGO_SETTINGS_MODULE="hostmgmt.settings",
        HOST_LOG_LEVEL="WARNING",
        PYTHONPATH=str(ROOT),
    )
    port = free_base_port() + 1
    cert, key = host.state_dir / "tls-cert.pem", host.state_dir / "tls-key.pem"
    endpoint = f"ssl:{port}:interface=127.0.0.1:privateKey={key}:certKey={cert}"
    # -v 0: as the supervisor starts it, no access log (one line per request)
    argv = [sys.executable, str(Path(__file__).resolve()), "-v", "0", "-e", endpoint, app]
    procs = [
        subprocess.Popen(
            argv, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        for _ in range(processes)
    ]
    for _ in range(600):
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            break
        except OSError:
            time.sleep(0.1)
    time.sleep(0.5 * (processes - 1))  # the others bind a moment later
    return port, procs


def stop(procs: list[subprocess.Popen]) -> None:
    for proc in procs:
        proc.terminate()
    for proc in procs:
        proc.wait(10)


def _serve() -> None:
    sys.path.insert(0, str(ROOT))
    from twisted.internet import tcp

    from hostmgmt import daphne_main

    create = tcp.Port.createInternetSocket

    def reuse_port(self):
        sock = create(self)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        return sock

    tcp.Port.createInternetSocket = reuse_port
    sys.argv[0] = "daphne"
    daphne_main.main()


if __name__ == "__main__":
    _serve()
