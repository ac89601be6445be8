"""A session process's body: the session manager (a warm process: Django set up, both planes
imported, `warm_up`) forks one child per session, which runs `run(plane, spec)` here; its
stdout is the requester's connection, so the plane's first answer line goes straight back
(native: the SDP answer; compat: `{"pid"}`; the result of arming goes to the waiting /launch
through Redis). Then the session runs to its end in this process."""

from __future__ import annotations

import importlib
import json
import logging
import os
import sys

from common.statedir import state_path
from streaming.sessions import planes

# Where a session's stderr goes: the native peer's own log; the compat session's into the
# host's output.
LOG_NAMES = {"native": "native-peer.log"}


# What a session imports on its way up, imported while the process waits for its request
# (with what each plane registered in `planes`).
WARM = (
    "streaming.sessions.lifecycle",
    "streaming.sessions.watch",
    "streaming.sessions.apps",
    "streaming.sessions.sound",
    "library.catalog",
    "library.services",
    "displays.machine",
    "media.audio.capture",
    "media.audio.chain",
    "media.audio.opus",
    "media.audiofeed",
    "media.encoder",
    "media.framesource",
    "media.input.session",
    "games.lifecycle",
    "games.profiles",
    "games.apprun",
    "streaming.history",
    "hooks.prep",
    "hooks.stream_webhooks",
)


def reply(obj: dict) -> None:
    """The plane's one line to the requester (the spawn socket), then stdout is closed."""
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()
    sys.stdout.close()


def warm_up() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "hostmgmt.settings")
    # Django app loading, here only: the manager's module (also native.media's spawned
    # encoder child's __mp_main__) imports this one and stays Django-free
    import django

    django.setup()
    for name in (*WARM, *planes.warm_modules()):
        try:
            importlib.import_module(name)
        except Exception:  # an optional backend missing: imported when used
            pass


def _log_to(plane: str) -> None:
    name = LOG_NAMES.get(plane)
    if name:
        with open(state_path("logs", name), "ab") as fh:
            os.dup2(fh.fileno(), 2)
    logging.basicConfig(level=logging.INFO, format=f"%(asctime)s {plane}-session %(message)s")


def run(plane: str, spec: dict) -> int:
    _log_to(plane)
    body = planes.entry(plane)
    if body is None:
        return 2
    return body(spec)
