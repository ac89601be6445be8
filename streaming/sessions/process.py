"""One session's process: `python -m streaming.sessions.process <plane>`, started by the
session manager. Reads the plane's spec (a JSON line) on stdin; the plane's first answer line
goes out on stdout (native: the SDP answer; compat: `{"pid"}`, the result of arming goes to
the waiting /launch through Redis), then the session runs to its end here."""

from __future__ import annotations

import json
import logging
import os
import sys


def main() -> int:
    plane = sys.argv[1] if len(sys.argv) > 1 else ""
    logging.basicConfig(level=logging.INFO, format=f"%(asctime)s {plane}-session %(message)s")
    spec = json.loads(sys.stdin.readline())
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "hostmgmt.settings")
    import django

    django.setup()
    if plane == "native":
        from streaming.native import peer

        return peer.main(spec)
    if plane == "compat":
        from streaming import session_runner

        return session_runner.main(spec)
    return 2


if __name__ == "__main__":
    sys.exit(main())
