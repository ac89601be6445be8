"""A session process's body: the session manager (a warm process: Django set up, both planes
imported, `warm_up`) forks one child per session, which runs `run(plane, spec)` here; its
stdout is the requester's connection, so the plane's first answer line goes straight back
(native: the SDP answer, at once; compat: the /launch answer `{"status", "message"}`, once the
session is armed, `held_answer`). Then the session runs to its end in this process."""

from __future__ import annotations

import contextlib
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


def reply(obj: dict, out=None) -> None:
    """The plane's one line to the requester (the spawn socket: stdout, or `out` where the
    plane moved it), then that stream is closed."""
    out = sys.stdout if out is None else out
    out.write(json.dumps(obj) + "\n")
    out.flush()
    out.close()


@contextlib.contextmanager
def held_answer(failure: dict):
    """The spawn socket as a stream of its own, with fd 1 pointed at stderr meanwhile: for a
    plane that answers only once it has started things, so nothing it starts (an app, a
    compositor) writes into the answer line through an inherited stdout. Unanswered at the
    end (the session failed before it could say why): `failure`."""
    answer = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)
    try:
        yield answer
    finally:
        if not answer.closed:
            reply(failure, answer)


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
