"""Settings of the library app, read from the environment on every call.

Reading lazily (not at import) lets tests and the `runhost` children point the scanners at
fixture trees and the art CDN at a local server through plain environment variables.
"""

from __future__ import annotations

import os
from pathlib import Path

from common.env import env_int, env_str
from common.statedir import state_dir
from hostconfig import store


def _paths(name: str, defaults: list[Path]) -> list[Path]:
    raw = os.environ.get(name)
    if raw is None:
        return defaults
    return [Path(p).expanduser() for p in raw.split(os.pathsep) if p.strip()]


def _home() -> Path:
    return Path.home()


def _xdg(name: str, fallback: str) -> Path:
    raw = os.environ.get(name, "").strip()
    return Path(raw) if raw else _home() / fallback


def steam_roots() -> list[Path]:
    """HOST_STEAM_ROOTS (os.pathsep-separated); a root counts only if it has `steamapps/`."""
    home = _home()
    return _paths(
        "HOST_STEAM_ROOTS",
        [
            home / ".local/share/Steam",
            home / ".steam/steam",
            home / ".steam/root",
            home / ".var/app/com.valvesoftware.Steam/.local/share/Steam",
        ],
    )


def heroic_roots() -> list[Path]:
    """HOST_HEROIC_ROOTS: Heroic config dirs (each holds `store_cache/`)."""
    return _paths(
        "HOST_HEROIC_ROOTS",
        [
            _xdg("XDG_CONFIG_HOME", ".config") / "heroic",
            _home() / ".var/app/com.heroicgameslauncher.hgl/config/heroic",
        ],
    )


def lutris_dbs() -> list[Path]:
    """HOST_LUTRIS_DB: candidate `pga.db` files; the first that exists is read."""
    return _paths(
        "HOST_LUTRIS_DB",
        [
            _xdg("XDG_DATA_HOME", ".local/share") / "lutris/pga.db",
            _home() / ".local/share/lutris/pga.db",
            _home() / ".var/app/net.lutris.Lutris/data/lutris/pga.db",
        ],
    )


def lutris_game_dirs() -> list[Path]:
    """HOST_LUTRIS_GAMES_DIRS: where Lutris keeps its per-game YAMLs (read for `exe` hints)."""
    return _paths(
        "HOST_LUTRIS_GAMES_DIRS",
        [
            _xdg("XDG_DATA_HOME", ".local/share") / "lutris/games",
            _xdg("XDG_CONFIG_HOME", ".config") / "lutris/games",
        ],
    )


def art_cdn_url() -> str:
    """HOST_ART_CDN_URL: base of Steam's public art CDN (`<base>/steam/apps/<appid>/<file>`)."""
    return env_str("HOST_ART_CDN_URL", "https://cdn.cloudflare.steamstatic.com").rstrip("/")


def art_fetch_timeout_s() -> int:
    return env_int("HOST_ART_FETCH_TIMEOUT_S", 10)


def art_miss_ttl_s() -> int:
    """How long a CDN miss is remembered before the CDN is asked again."""
    return env_int("HOST_ART_MISS_TTL_S", 3600)


def cover_url_prefix() -> str:
    """HOST_COVER_URL_PREFIX: the one image host cover uploads may name by URL."""
    return env_str("HOST_COVER_URL_PREFIX", "https://images.igdb.com/")


def poll_interval_s() -> int:
    """HOST_LIBRARY_POLL_S: seconds between store-file mtime checks (supervisor); 0 = off."""
    return env_int("HOST_LIBRARY_POLL_S", 15)


def art_dir() -> Path:
    return state_dir() / "art"


def covers_dir() -> Path:
    return state_dir() / "covers"


def apps_file() -> Path:
    """The app catalog: HOST_APPS_FILE, else host.conf's `file_apps` (read on every call, so a
    change applies at once), else `apps.json` in the state dir."""
    raw = env_str("HOST_APPS_FILE", "").strip()
    if raw:
        return Path(raw)
    chosen = store.get("file_apps")
    return Path(chosen) if chosen else state_dir() / "apps.json"


MAX_TITLE = 256
MAX_DOWNLOAD = 8 * 1024 * 1024
MAX_LOCAL_ART = 16 * 1024 * 1024
