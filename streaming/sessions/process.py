"""One session's process: `python -m streaming.sessions.process`, started by the session
manager ahead of need (a warm standby: Django set up and both planes' code imported, so a
/launch or an offer does not wait for an interpreter to start). Its first stdin line is the
request `{"plane", "spec"}`; the plane's first answer line goes out on stdout (native: the
SDP answer; compat: `{"pid"}`, the result of arming goes to the waiting /launch through
Redis), then the session runs to its end here."""

from __future__ import annotations

import json
import logging
import os
import sys

# Where a session's stderr goes: the native peer's own log (as before the core), the compat
# session's into the host's output (as when it ran in the Celery worker).
LOG_NAMES = {"native": "native-peer.log"}


def _warm_up() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "hostmgmt.settings")
    import django

    django.setup()
    import streaming.native.peer  # noqa: F401
    import streaming.session_runner  # noqa: F401

    try:
        import aiortc  # noqa: F401 - the native peer's, the slowest import
    except ImportError:
        pass


def _log_to(plane: str) -> None:
    from hostmgmt.lib.statedir import state_path

    name = LOG_NAMES.get(plane)
    if name:
        with open(state_path("logs", name), "ab") as fh:
            os.dup2(fh.fileno(), 2)
    logging.basicConfig(level=logging.INFO, format=f"%(asctime)s {plane}-session %(message)s")


def main() -> int:
    _warm_up()
    line = sys.stdin.readline()
    if not line.strip():
        return 0  # the manager stopped before this standby was needed
    request = json.loads(line)
    plane, spec = request["plane"], request["spec"]
    _log_to(plane)
    if plane == "native":
        from streaming.native import peer

        return peer.main(spec)
    if plane == "compat":
        from streaming import session_runner

        return session_runner.main(spec)
    return 2


if __name__ == "__main__":
    sys.exit(main())
