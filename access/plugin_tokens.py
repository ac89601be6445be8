"""Per-plugin tokens: each plugin the runner starts gets a plugin token of its own, bound to its id.

Why not the host's one plugin token: with it, any plugin could renew, delete or read the UI
credential of another. A bound token carries the plugin token's allow list plus its OWN
`/plugins/{id}` and `/plugins/{id}/ui-credential` (access/mgmt.py `PLUGIN_OWN`).

The tokens are random (64 hex, like every host token) and kept in one file,
`<state>/plugins/tokens.json`, mode 0600, written atomically; they survive restarts so a
plugin's token does not change under it. `lookup()` compares a presented token with every entry
in constant time, so neither which plugin nor how much of a token matched leaks through timing.

Nothing here imports Django.
"""

from __future__ import annotations

import json
import re
import threading
from pathlib import Path

from access.secrets import is_token_shaped, new_token, tokens_equal
from common import filecache, statedir
from common.files import atomic_write

# A plugin id: what a plugin's entry point names itself (plugins/env.py checks it too).
PLUGIN_ID = re.compile(r"[a-z][a-z0-9-]{0,63}")

FILE = "tokens.json"
_lock = threading.Lock()


def path() -> Path:
    return statedir.state_path("plugins", FILE)


def _parse(raw: bytes) -> dict[str, str]:
    data = json.loads(raw)
    return {
        k: v
        for k, v in (data.items() if isinstance(data, dict) else [])
        if isinstance(k, str) and PLUGIN_ID.fullmatch(k) and isinstance(v, str)
        and is_token_shaped(v)
    }  # fmt: skip


def _read() -> dict[str, str]:
    """The tokens, parsed once per version of the file (shared: copy before changing)."""
    return filecache.parsed(path(), _parse, {})


def _write(tokens: dict[str, str]) -> None:
    p = path()
    p.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    atomic_write(p, json.dumps(tokens, sort_keys=True) + "\n", mode=0o600)


def ensure(plugin_id: str) -> str:
    """The plugin's token, made on first use."""
    if not PLUGIN_ID.fullmatch(plugin_id):
        raise ValueError("bad plugin id")
    with _lock:
        tokens = dict(_read())
        if plugin_id not in tokens:
            tokens[plugin_id] = new_token()
            _write(tokens)
        return tokens[plugin_id]


def prune(keep: set[str]) -> None:
    """Forget the tokens of plugins no longer installed (an uninstalled plugin's token dies)."""
    with _lock:
        tokens = _read()
        kept = {k: v for k, v in tokens.items() if k in keep}
        if kept != tokens:
            _write(kept)


def lookup(presented: str) -> str | None:
    """The plugin id a presented token is bound to, or None. Every entry is compared."""
    found = None
    for plugin_id, token in _read().items():
        if tokens_equal(presented, token):
            found = plugin_id
    return found
