"""The tokens members minted for this host, kept like the host's own secrets: one file,
`<state>/fleet/tokens.json`, mode 0600, written atomically, never in the database, a log, a page
or an error body. Keyed by member id.

Nothing here imports Django.
"""

from __future__ import annotations

import json
import threading
from pathlib import Path

from common import statedir
from common.files import atomic_write

FILE = "tokens.json"
_lock = threading.Lock()


def path() -> Path:
    return statedir.state_path("fleet", FILE)


def _read() -> dict[str, str]:
    try:
        data = json.loads(path().read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    if not isinstance(data, dict):
        return {}
    return {str(k): v for k, v in data.items() if isinstance(v, str)}


def get(member_id: int) -> str | None:
    return _read().get(str(member_id))


def put(member_id: int, token: str) -> None:
    with _lock:
        data = _read()
        data[str(member_id)] = token
        path().parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        atomic_write(path(), json.dumps(data), mode=0o600)


def drop(member_id: int) -> None:
    with _lock:
        data = _read()
        if data.pop(str(member_id), None) is not None:
            atomic_write(path(), json.dumps(data), mode=0o600)
