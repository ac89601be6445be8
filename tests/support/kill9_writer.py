"""A fork server for the kill -9 write tests: sets Django up once (with its own state dir),
then for each `round` line on stdin forks a writer that does 100 alternating writes of one
editable file, printing its pid first and `w` after each completed write. The test SIGKILLs
the writer at a random moment; the server reaps it and answers `reaped`.

Usage: python kill9_writer.py KIND (config | hooks | apps | pairing), HOST_STATE_DIR set."""

from __future__ import annotations

import os
import sys

WRITES = 100

HOOKS = [
    [{"on": "stream.*", "run": "true"}],
    [{"on": "game.*", "run": "echo end", "timeout_s": 5}, {"on": "game.*", "run": "true"}],
]
APPS = [
    {"env": {}, "apps": [{"name": "Desktop", "image-path": "desktop.png"}]},
    {"env": {"A": "1"}, "apps": [{"name": "Alpha", "cmd": "true"}, {"name": "Beta"}]},
]
NAMES = ["first-name", "second-name"]


def writer(kind: str) -> None:
    from hooks import hook_config
    from hostconfig import store
    from library import catalog
    from pairing import services
    from tests.support.certs import identity

    cert = identity(0, "ec")[1]
    for i in range(WRITES):
        n = i % 2
        if kind == "config":
            store.write({"max_sessions": str(2 + n)})
        elif kind == "hooks":
            hook_config.save(HOOKS[n])
        elif kind == "apps":
            catalog.replace_document(APPS[n])
        else:
            services.store_client(cert, NAMES[n])
        os.write(1, b"w\n")


def main(kind: str) -> None:
    import django

    django.setup()
    from django.core.management import call_command
    from django.db import connections

    from tests.support.certs import identity

    if kind == "pairing":
        call_command("migrate", interactive=False, verbosity=0)
    identity(0, "ec")  # made once, before the forks
    import hooks.hook_config  # noqa: F401 - imported once, before the forks
    import hostconfig.store  # noqa: F401
    import library.catalog  # noqa: F401
    import pairing.services  # noqa: F401

    connections.close_all()  # each writer opens its own
    for line in sys.stdin:
        if line.strip() != "round":
            continue
        pid = os.fork()
        if pid == 0:
            try:
                os.write(1, f"pid {os.getpid()}\n".encode())
                writer(kind)
            finally:
                os._exit(0)
        os.waitpid(pid, 0)
        os.write(1, b"reaped\n")


if __name__ == "__main__":
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "hostmgmt.settings")
    main(sys.argv[1])
