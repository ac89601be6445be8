"""Lutris: installed rows of its SQLite database `pga.db` (opened read-only), plus the `exe` of
each game's YAML (`games/<configpath>.yml`) as a detect hint."""

from __future__ import annotations

import logging
import os
import re
import sqlite3
from pathlib import Path

import yaml

from library import conf
from library.scanners.base import ScannedTitle, clean_title, read_text, stat_sig

log = logging.getLogger("library.scanners.lutris")

ID = "lutris"
LABEL = "Lutris"
_CONFIG_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,200}$")


def database() -> Path | None:
    for path in conf.lutris_dbs():
        if path.is_file():
            return path
    return None


def _game_dirs(db: Path) -> list[Path]:
    dirs = [db.parent / "games", *conf.lutris_game_dirs()]
    return [d for i, d in enumerate(dirs) if d.is_dir() and d not in dirs[:i]]


def _exe(configpath: object, dirs: list[Path]) -> str:
    """The absolute `game.exe` of a game's YAML, or ''. The name must be a plain file name."""
    if not isinstance(configpath, str) or not _CONFIG_NAME.match(configpath):
        return ""
    for folder in dirs:
        path = folder / f"{configpath}.yml"
        if not path.is_file():
            continue
        text = read_text(path)
        try:
            doc = yaml.safe_load(text) if text else None
        except yaml.YAMLError as exc:
            log.warning("skipping %s: %s", path, exc)
            return ""
        game = doc.get("game") if isinstance(doc, dict) else None
        exe = game.get("exe") if isinstance(game, dict) else None
        return exe if isinstance(exe, str) and os.path.isabs(exe) else ""
    return ""


def scan() -> list[ScannedTitle]:
    path = database()
    if path is None:
        return []
    try:
        # Read-only: we never take a lock Lutris might wait on.
        con = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True, timeout=2)
        con.text_factory = lambda b: b.decode("utf-8", errors="replace")
        try:
            cols = {row[1] for row in con.execute("PRAGMA table_info(games)")}
            config = "configpath" if "configpath" in cols else "NULL"
            rows = con.execute(
                f"SELECT id, name, directory, {config} FROM games "  # fixed names
                "WHERE installed = 1 AND name IS NOT NULL"
            ).fetchall()
        finally:
            con.close()
    except sqlite3.Error as exc:
        log.warning("skipping %s: %s", path, exc)
        return []
    dirs = _game_dirs(path)
    out = []
    for gid, name, directory, configpath in rows:
        title = clean_title(name)
        if not isinstance(gid, int) or not title:
            continue
        install = directory if isinstance(directory, str) else ""
        detect = {"install_dir": install} if install else {}
        exe = _exe(configpath, dirs) if dirs else ""
        if exe:
            detect["exe"] = exe
        out.append(
            ScannedTitle(
                id=f"lutris:{gid}",
                store=ID,
                title=title,
                install_dir=install,
                launch={"kind": "lutris_id", "value": str(gid)},
                detect=detect,
            )
        )
    return out


def signature() -> list:
    path = database()
    if path is None:
        return []
    return stat_sig([path, Path(f"{path}-wal"), *_game_dirs(path)])
