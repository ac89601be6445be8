"""The compat app catalog: `apps.json`, the file an operator may also edit by hand.

Functions for other apps (the compat plane's `/applist` and `/appasset`, the streaming engine):
- `list_apps() -> list[App]` — every app with its GameStream id; [] (and a log line) when the
  file is broken by hand.
- `find_app(app_id: str) -> App | None` — by GameStream id (decimal string).
- `cover_png(app) -> bytes | None` — the app's validated PNG image, None when it has none.
- `box_png() -> bytes` — the default box art to serve when `cover_png` gives None.

App id (reference A.6): S = env-expanded name, plus the lowercase hex SHA-256 of the image file
when `image-path` names a valid PNG; id = CRC-32 of S as a signed int32, absolute value, in
decimal; a repeat of an earlier id uses CRC-32 of S + the 0-based index instead.

Writes are atomic and serialized with a lock file; a file that does not parse is reported
(`CatalogBroken`) and never overwritten. A missing file is created with a "Desktop" entry.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import logging
import os
import re
import threading
import zlib
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from common.files import atomic_write
from common.statedir import state_dir
from hostconfig import store
from library import conf, imaging, services

log = logging.getLogger("library.catalog")

DEFAULT_DOCUMENT = {"env": {}, "apps": [{"name": "Desktop", "image-path": "desktop.png"}]}
# `detached`, `auto-detach`, `wait-all`, `output` and `elevated` act in the app runner of both
# planes (games.appfields, streaming.sessions.lifecycle.AppRun); `elevated: true` is refused at
# write time and reported by the readiness report when a hand edit sets it.
BOOL_FIELDS = ("auto-detach", "wait-all", "exclude-global-prep-cmd", "elevated")
BOOL_DEFAULTS = {"auto-detach": True, "wait-all": True}
_lock = threading.Lock()
_cache: dict = {}


class CatalogBroken(Exception):
    """apps.json exists but is not a catalog; the message says where it breaks."""


@dataclass
class App:
    id: str
    index: int
    name: str
    cmd: str = ""
    working_dir: str = ""
    output: str = ""
    env: dict = field(default_factory=dict)
    auto_detach: bool = True
    wait_all: bool = True
    exit_timeout: int = 5
    exclude_global_prep_cmd: bool = False
    elevated: bool = False
    prep: list = field(default_factory=list)  # [{do, undo, elevated}]
    detached: list = field(default_factory=list)
    image_path: str | None = None  # resolved path of a valid PNG, else None
    encoder_preset: int | None = None  # -1..2; None = keep the host default
    raw: dict = field(default_factory=dict)


# -- file access -----------------------------------------------------------------------------
@contextmanager
def _locked():
    path = conf.apps_file()
    path.parent.mkdir(parents=True, exist_ok=True)
    with _lock, open(path.parent / f".{path.name}.lock", "a") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield path
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def _parse(text: str) -> dict:
    if not text.strip():
        return {"env": {}, "apps": []}
    try:
        doc = json.loads(text)
    except ValueError as exc:
        raise CatalogBroken(f"apps.json is not valid JSON ({exc})") from None
    if not isinstance(doc, dict):
        raise CatalogBroken("apps.json must hold a JSON object with an `apps` array")
    apps = doc.get("apps", [])
    env = doc.get("env", {})
    if not isinstance(apps, list) or not all(isinstance(a, dict) for a in apps):
        raise CatalogBroken("apps.json: `apps` must be an array of objects")
    if not isinstance(env, dict):
        raise CatalogBroken("apps.json: `env` must be an object")
    doc["apps"], doc["env"] = apps, env
    return doc


def _read(path: Path) -> dict:
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        doc = json.loads(json.dumps(DEFAULT_DOCUMENT))
        _write(path, doc)
        return doc
    except OSError as exc:
        raise CatalogBroken(f"apps.json cannot be read ({exc.strerror})") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise CatalogBroken("apps.json is not UTF-8") from None
    return _parse(text)


def _write(path: Path, doc: dict) -> None:
    atomic_write(path, json.dumps(doc, indent=4, ensure_ascii=False) + "\n", mode=0o644)
    _remember(path)


def _sig(path: Path) -> str:
    try:
        st = path.stat()
    except OSError:
        return "missing"
    return f"{st.st_mtime_ns}:{st.st_size}:{st.st_ino}"


def _seen_file(path: Path) -> Path:
    return path.parent / f".{path.name}.seen"


def _remember(path: Path) -> None:
    """Note the file as the host wrote it, so the poller can tell our writes from hand edits."""
    atomic_write(_seen_file(path), _sig(path), mode=0o600)


def hand_edited() -> bool:
    """True once per change of apps.json the host did not make itself (the worker polls this)."""
    with _locked() as path:
        seen = _seen_file(path)
        current = _sig(path)
        try:
            previous = seen.read_text()
        except FileNotFoundError:
            previous = None
        if previous == current:
            return False
        atomic_write(seen, current, mode=0o600)
        return previous is not None


def _changed() -> None:
    services.emit_changed("manual")


def load_document() -> dict:
    """The whole file ({env, apps}); CatalogBroken when hand edits broke it."""
    with _locked() as path:
        return _read(path)


# -- reading ---------------------------------------------------------------------------------
_VAR = re.compile(r"\$\$|\$\(([^)]*)\)")


def expand(text: str, env: dict) -> str:
    """`$(VAR)` from `env` then the process environment; `$$` is a literal `$`."""

    def sub(m: re.Match) -> str:
        if m.group(0) == "$$":
            return "$"
        name = m.group(1)
        return str(env.get(name, os.environ.get(name, "")))

    return _VAR.sub(sub, text) if isinstance(text, str) else ""


def _as_bool(value, default: bool) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str):
        return value.strip().lower() in ("true", "1", "yes", "on")
    if isinstance(value, int):
        return value != 0
    return default


def _as_int(value, default: int) -> int:
    if isinstance(value, bool):
        return default
    try:
        return int(value)
    except (TypeError, ValueError):
        return default


def resolve_image(image: str | None) -> Path | None:
    """The file a catalog `image-path` names when it is a valid PNG, else None."""
    if not isinstance(image, str) or not image.strip() or "\x00" in image:
        return None
    if not image.lower().endswith(".png"):
        return None
    raw = Path(image).expanduser()
    candidates = [raw] if raw.is_absolute() else [conf.covers_dir() / raw, state_dir() / raw]
    for path in candidates:
        try:
            if path.is_file() and path.stat().st_size <= conf.MAX_LOCAL_ART:
                with open(path, "rb") as fh:
                    if fh.read(8) == imaging.PNG_SIGNATURE:
                        return path
        except OSError:
            continue
    return None


def _image_digest(path: Path | None) -> str:
    if path is None:
        return ""
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError:
        return str(path)


def _crc_id(text: str) -> str:
    value = zlib.crc32(text.encode("utf-8"))
    if value >= 0x80000000:
        value -= 0x100000000
    return str(abs(value))


def normalize(app: dict) -> dict:
    """Legacy string values ("true", "5") as the booleans and integers the API serves."""
    out = dict(app)
    for key in BOOL_FIELDS:
        if isinstance(out.get(key), str):
            out[key] = _as_bool(out[key], BOOL_DEFAULTS.get(key, False))
    if isinstance(out.get("exit-timeout"), str):
        out["exit-timeout"] = _as_int(out["exit-timeout"], 5)
    if isinstance(out.get("prep-cmd"), list):
        out["prep-cmd"] = [
            dict(p, elevated=_as_bool(p["elevated"], False))
            if isinstance(p, dict) and isinstance(p.get("elevated"), str)
            else p
            for p in out["prep-cmd"]
        ]
    return out


def global_prep() -> list[dict]:
    """The host's `global_prep_cmd` steps (validated by the config schema), run before every
    app's own `prep-cmd` unless the entry sets `exclude-global-prep-cmd`."""
    try:
        steps = store.get("global_prep_cmd") or []
    except Exception:  # a broken config must not hide the catalog
        log.exception("global_prep_cmd unreadable; no global prep steps")
        return []
    return [s for s in steps if isinstance(s, dict)]


def build_apps(doc: dict) -> list[App]:
    env = {k: expand(str(v), {}) for k, v in doc.get("env", {}).items()}
    global_steps = global_prep()
    apps: list[App] = []
    seen: set[str] = set()
    for index, raw in enumerate(doc.get("apps", [])):
        app_env = dict(env)
        if isinstance(raw.get("env"), dict):
            app_env.update({str(k): expand(str(v), env) for k, v in raw["env"].items()})
        name = expand(raw.get("name", ""), app_env)
        image = resolve_image(raw.get("image-path"))
        base = name + _image_digest(image)
        app_id = _crc_id(base)
        if app_id in seen:
            app_id = _crc_id(base + str(index))
        seen.add(app_id)
        preset = raw.get("encoder-preset")
        prep = [
            {
                "do": expand(p.get("do", ""), app_env),
                "undo": expand(p.get("undo", ""), app_env),
                "elevated": _as_bool(p.get("elevated"), False),
            }
            for p in (
                ([] if _as_bool(raw.get("exclude-global-prep-cmd"), False) else global_steps)
                + list(raw.get("prep-cmd") or [])
            )
            if isinstance(p, dict)
        ]
        apps.append(
            App(
                id=app_id,
                index=index,
                name=name,
                cmd=expand(raw.get("cmd", ""), app_env),
                working_dir=expand(raw.get("working-dir", ""), app_env),
                output=expand(raw.get("output", ""), app_env),
                env=app_env,
                auto_detach=_as_bool(raw.get("auto-detach"), True),
                wait_all=_as_bool(raw.get("wait-all"), True),
                exit_timeout=_as_int(raw.get("exit-timeout"), 5),
                exclude_global_prep_cmd=_as_bool(raw.get("exclude-global-prep-cmd"), False),
                elevated=_as_bool(raw.get("elevated"), False),
                prep=prep,
                detached=[expand(d, app_env) for d in raw.get("detached") or [] if d],
                image_path=str(image) if image else None,
                encoder_preset=preset
                if isinstance(preset, int) and not isinstance(preset, bool) and -1 <= preset <= 2
                else None,
                raw=raw,
            )
        )
    return apps


def list_apps() -> list[App]:
    path = conf.apps_file()
    try:
        st = path.stat()
        key = (str(path), st.st_mtime_ns, st.st_size)
    except OSError:
        key = None
    if key is not None and _cache.get("key") == key:
        return list(_cache["apps"])
    try:
        apps = build_apps(load_document())
    except CatalogBroken as exc:
        log.error("%s; serving an empty catalog until it is fixed", exc)
        return []
    _cache.update(key=key, apps=apps)
    return list(apps)


def find_app(app_id: str) -> App | None:
    return next((a for a in list_apps() if a.id == str(app_id)), None)


def cover_png(app: App) -> bytes | None:
    if not app.image_path:
        return None
    try:
        data = Path(app.image_path).read_bytes()
    except OSError:
        return None
    return data if imaging.is_valid_png(data) else None


def box_png() -> bytes:
    return imaging.box_png()


# -- admin API operations ---------------------------------------------------------------------
def api_document() -> dict:
    doc = load_document()
    return {"env": doc["env"], "apps": [normalize(a) for a in doc["apps"]]}


def save_app(index: int, app: dict) -> int:
    """Create (`index` -1) or replace one app; returns its index after the by-name sort."""
    with _locked() as path:
        doc = _read(path)
        apps = doc["apps"]
        if index == -1:
            apps.append(app)
        elif 0 <= index < len(apps):
            apps[index] = app
        else:
            raise IndexError(f"'index' {index} out of range, max index is {len(apps) - 1}")
        # Sunshine sorts by name byte-wise on every save; clients expect that order.
        apps.sort(key=lambda a: str(a.get("name", "")).encode("utf-8"))
        _write(path, doc)
    _changed()
    return next(i for i, a in enumerate(apps) if a is app)


def delete_app(index: int) -> None:
    with _locked() as path:
        doc = _read(path)
        apps = doc["apps"]
        if not apps:
            raise IndexError("No applications found")
        if not 0 <= index < len(apps):
            raise IndexError(f"'index' {index} out of range, max index is {len(apps) - 1}")
        del apps[index]
        _write(path, doc)
    _changed()


def replace_document(doc: dict) -> None:
    """Write a whole catalog (the import command); the current file must parse."""
    with _locked() as path:
        if path.exists():
            _read(path)
        _write(path, doc)
    _changed()
