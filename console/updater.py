"""Update status: is a newer release announced by the signed release manifest?

The manifest is fetched from `update_manifest_url` (a config schema key: host config file, else
the HOST_UPDATE_MANIFEST_URL environment; https, plain http only to loopback) and must carry a
valid Ed25519 signature by the key pinned in `settings.UPDATE_PUBLIC_KEY`; anything else is
recorded as `last_error` and never believed. Applying a release is console/update_apply.py's
(`apply` is `manual`: started through POST /api/v1/update/apply; `auto` while the `update_auto`
key applies it after that many idle minutes, console/update_auto.py; docs/updates.md).

No release signing key exists yet, so this build pins none and refuses every manifest: the
status says so in `refused` (and the console's dashboard shows it) instead of pretending that
the host is up to date.

Manifest document (JSON, at most 64 KiB):
    {"payload": "<base64 of the UTF-8 JSON below>", "signature": "<base64 Ed25519 signature
     of the payload bytes>"}
    payload: {"version": "v2026.1201.0-stable", "channel": "stable", "serial": 1764547200,
              "published_at": "2026-12-01T00:00:00Z", "notes_url": "https://...",
              "artifacts": {"source": {"commit": "<40 hex>", "url": "https://...tar.gz",
                                       "sha256": "<64 hex>", "size": 12345678}}}
    `artifacts` is optional (a report-only manifest); when present it must be well formed, or the
    whole manifest is refused (docs/updates.md, "A release").

The last check is kept in `update-state.json` (state dir) so every process reports the same, and
`update.available` is emitted once per discovered version, even across restarts.

Rollback: a validly signed but older manifest (a replayed one, or a mirror serving a stale copy)
must not hide a newer release. The version and serial of the last accepted manifest are kept in
the same file (`accepted`, written atomically, checks serialised by a lock file), and a manifest
is believed only when both its version and its serial are newer than those, or when it is the
very manifest accepted last (a re-fetch). A manifest without a positive integer serial is
refused.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import fcntl
import json
import logging
import os
import re
import time
import urllib.error
import urllib.parse
import urllib.request
from datetime import datetime

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey
from django.conf import settings

from common import netranges, update_journal
from common.errors import DomainError
from common.files import atomic_write
from common.statedir import state_path
from common.version import VERSION
from hooks import events
from hostconfig import store

log = logging.getLogger(__name__)

STATE_FILE = "update-state.json"
LOCK_FILE = "update-state.lock"
MAX_MANIFEST_BYTES = 64 * 1024
FETCH_TIMEOUT_S = 10
STALE_DAYS = 45
CHECK_MIN_INTERVAL_S = 30
CHECK_INTERVAL_S = 6 * 3600  # the supervisor's periodic check
INSTALL_KIND = "source"
MAX_ARCHIVE_BYTES = 512 * 1024 * 1024
_HEX40 = re.compile(r"^[0-9a-f]{40}$")
_HEX64 = re.compile(r"^[0-9a-f]{64}$")
_VERSION_RE = re.compile(r"^v(\d{4})\.(\d{3,4})\.(\d+)(?:-[A-Za-z0-9.]+)?$")


class ManifestError(ValueError):
    pass


class CheckRefused(DomainError):
    def __init__(self, status: int, message: str):
        super().__init__(message, status=status)


def version_key(version: str) -> tuple[int, int, int] | None:
    """Build versions `v<YYYY>.<MDD>.<N>-<suffix>` compare by (year, month-day, build)."""
    match = _VERSION_RE.match(version or "")
    if match is None:
        return None
    return int(match.group(1)), int(match.group(2)), int(match.group(3))


def is_newer(candidate: str, current: str = VERSION) -> bool:
    a, b = version_key(candidate), version_key(current)
    return a is not None and b is not None and a > b


NO_KEY_REASON = (
    "no release signing key is pinned in this build (settings.UPDATE_PUBLIC_KEY): none has been "
    "published yet, so every manifest is refused and no update can be reported. Private builds "
    "and test rigs may pin their own key with HOST_UPDATE_PUBLIC_KEY."
)


def manifest_url() -> str:
    """The configured manifest URL ("" when none), read through the config schema.

    ManifestError names the rule when the file or environment value breaks it.
    """
    try:
        value = store.effective("update_manifest_url")
    except store.ConfigError as exc:
        raise ManifestError("; ".join(f"{k}: {v}" for k, v in exc.fields.items())) from None
    except OSError:
        value = None
    return value or ""


def refused_reason() -> str | None:
    """Why no update can be reported at all right now (None when checks can work)."""
    if check_disabled():
        return "update checks are disabled (UPDATE_CHECK=0)"
    if not settings.UPDATE_PUBLIC_KEY:
        return NO_KEY_REASON
    try:
        url = manifest_url()
    except ManifestError as exc:
        return str(exc)
    if not url:
        return "no update_manifest_url is configured (host.conf or HOST_UPDATE_MANIFEST_URL)"
    return None


def check_disabled() -> bool:
    return os.environ.get("UPDATE_CHECK", "").strip() == "0"


def verify_manifest(document: bytes, public_key_b64: str) -> dict:
    """The verified payload of a manifest document, or ManifestError saying why not."""
    if not public_key_b64:
        raise ManifestError(NO_KEY_REASON)
    try:
        key = Ed25519PublicKey.from_public_bytes(base64.b64decode(public_key_b64, validate=True))
    except (binascii.Error, ValueError):
        raise ManifestError("the pinned release key is malformed") from None
    try:
        outer = json.loads(document)
        payload = base64.b64decode(outer["payload"], validate=True)
        signature = base64.b64decode(outer["signature"], validate=True)
    except (ValueError, KeyError, TypeError, binascii.Error):
        raise ManifestError("manifest is not a signed manifest document") from None
    try:
        key.verify(signature, payload)
    except InvalidSignature:
        raise ManifestError("manifest signature does not verify") from None
    try:
        data = json.loads(payload)
    except ValueError:
        raise ManifestError("manifest payload is not JSON") from None
    if not isinstance(data, dict) or version_key(str(data.get("version", ""))) is None:
        raise ManifestError("manifest payload lacks a valid version")
    serial = data.get("serial")
    if isinstance(serial, bool) or not isinstance(serial, int) or serial <= 0:
        raise ManifestError("manifest payload lacks a valid serial")
    manifest = {
        "version": str(data["version"]),
        "channel": str(data.get("channel") or "stable"),
        "serial": serial,
        "published_at": str(data.get("published_at") or ""),
        "notes_url": str(data.get("notes_url") or ""),
    }
    if "artifacts" in data:  # absent from report-only manifests, and from states saved before
        manifest["artifacts"] = parse_artifacts(data["artifacts"])
    return manifest


def artifact_url_ok(url: str) -> bool:
    """https, or plain http to loopback only (the manifest URL's rule)."""
    parts = urllib.parse.urlsplit(url)
    if parts.scheme == "https":
        return bool(parts.hostname)
    return parts.scheme == "http" and netranges.is_loopback_host(parts.hostname or "")


def parse_artifacts(value: object) -> dict:
    """The release's artifacts by install kind; ManifestError names the first bad field."""
    if not isinstance(value, dict) or not isinstance(value.get(INSTALL_KIND), dict):
        raise ManifestError(f"manifest artifacts lack a `{INSTALL_KIND}` entry")
    entry = value[INSTALL_KIND]
    commit, url = entry.get("commit"), entry.get("url")
    sha256, size = entry.get("sha256"), entry.get("size")
    if not isinstance(commit, str) or not _HEX40.match(commit):
        raise ManifestError("manifest artifact commit is not a 40-hex git commit")
    if not isinstance(url, str) or not artifact_url_ok(url):
        raise ManifestError("manifest artifact url must be https (plain http only to loopback)")
    if not isinstance(sha256, str) or not _HEX64.match(sha256):
        raise ManifestError("manifest artifact sha256 is not 64 lowercase hex digits")
    if isinstance(size, bool) or not isinstance(size, int) or not 0 < size <= MAX_ARCHIVE_BYTES:
        raise ManifestError(
            f"manifest artifact size must be a positive integer up to {MAX_ARCHIVE_BYTES} bytes"
        )
    return {INSTALL_KIND: {"commit": commit, "url": url, "sha256": sha256, "size": size}}


def _fetch(url: str) -> bytes:
    request = urllib.request.Request(url, headers={"User-Agent": f"streaming-host/{VERSION}"})
    with urllib.request.urlopen(request, timeout=FETCH_TIMEOUT_S) as response:
        body = response.read(MAX_MANIFEST_BYTES + 1)
    if len(body) > MAX_MANIFEST_BYTES:
        raise ManifestError("manifest is larger than 64 KiB")
    return body


def refuse_rollback(manifest: dict, state: dict) -> None:
    """ManifestError unless `manifest` is newer, in version and serial, than the last accepted one
    (or is that very manifest again)."""
    # A state file from before `accepted` existed: its manifest is the one accepted last.
    accepted = state.get("accepted") or state.get("manifest")
    if not isinstance(accepted, dict):
        return
    last_version = str(accepted.get("version") or "")
    last_serial = accepted.get("serial")
    last_key = version_key(last_version)
    if last_key is None or not isinstance(last_serial, int):
        return
    if state.get("manifest") == manifest:
        return
    new_key = version_key(manifest["version"])
    if new_key is None or new_key <= last_key or manifest["serial"] <= last_serial:
        raise ManifestError(
            f"manifest {manifest['version']} (serial {manifest['serial']}) is not newer than the "
            f"last accepted {last_version} (serial {last_serial}); refused as a rollback"
        )


@contextlib.contextmanager
def _locked():
    """One check at a time across the host's processes, so two racing checks cannot lower the
    last accepted version."""
    with open(state_path(LOCK_FILE), "a") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def load_state() -> dict:
    try:
        data = json.loads(state_path(STATE_FILE).read_text())
    except (FileNotFoundError, ValueError, OSError):
        return {}
    return data if isinstance(data, dict) else {}


def _save_state(state: dict) -> None:
    atomic_write(state_path(STATE_FILE), json.dumps(state))


def check(force: bool = False) -> dict:
    """Fetch and verify the manifest now; record the outcome; announce a new version once."""
    if check_disabled():
        raise CheckRefused(409, "update checks are disabled (UPDATE_CHECK=0)")
    with _locked():
        return _check(force)


def scheduled_check() -> None:
    """The supervisor's periodic job; a failure is recorded in the update status."""
    try:
        check()
    except CheckRefused:
        pass  # checks disabled by the operator


def next_check_in(now: float | None = None) -> float:
    """Seconds until the periodic check is due: one interval after the last check (a restart
    does not reset the clock), one interval from now on a host that never checked."""
    now = time.time() if now is None else now
    try:
        last = float(load_state().get("last_checked_unix") or 0)
    except (TypeError, ValueError):
        last = 0.0
    if last <= 0:
        return float(CHECK_INTERVAL_S)
    return min(float(CHECK_INTERVAL_S), max(0.0, last + CHECK_INTERVAL_S - now))


def _check(force: bool) -> dict:
    state = load_state()
    last = state.get("last_checked_unix") or 0
    if force and time.time() - last < CHECK_MIN_INTERVAL_S:
        raise CheckRefused(429, "checked less than 30 s ago; try again shortly")
    state.update({"last_checked_unix": int(time.time()), "last_error": None})
    state["not_published"] = False
    unconfigured = False
    try:
        url = manifest_url()
        if not url:
            unconfigured = True
            raise ManifestError("no update_manifest_url is configured")
        if not settings.UPDATE_PUBLIC_KEY:
            raise ManifestError(NO_KEY_REASON)  # nothing fetched could be believed
        manifest = verify_manifest(_fetch(url), settings.UPDATE_PUBLIC_KEY)
        refuse_rollback(manifest, state)
    except urllib.error.HTTPError as exc:
        if exc.code == 404:
            state["not_published"] = True
        else:
            state["last_error"] = f"manifest fetch failed: HTTP {exc.code}"
    except (urllib.error.URLError, OSError, ManifestError) as exc:
        reason = getattr(exc, "reason", None) or exc
        state["last_error"] = f"manifest check failed: {reason}"
    else:
        state["manifest"] = manifest
        state["accepted"] = {"version": manifest["version"], "serial": manifest["serial"]}
        announced = [v for v in state.get("announced", []) if isinstance(v, str)]
        if is_newer(manifest["version"]) and manifest["version"] not in announced:
            announced.append(manifest["version"])
            _announce(manifest)
        state["announced"] = announced[-20:]
    if state.get("last_error") and not unconfigured:  # no URL is a choice, not a fault
        log.warning("%s", state["last_error"])
    _save_state(state)
    return status(state)


def _announce(manifest: dict) -> None:
    events.emit(
        "update.available",
        {
            "version": manifest["version"],
            "channel": manifest["channel"],
            "install_kind": INSTALL_KIND,
        },
    )


def _stale(published_at: str) -> bool:
    try:
        when = datetime.fromisoformat(published_at.replace("Z", "+00:00"))
    except ValueError:
        return False
    return (time.time() - when.timestamp()) > STALE_DAYS * 86400


def status(state: dict | None = None) -> dict:
    """UpdateStatus (mgmt-api-records §1.13), for both APIs."""
    state = load_state() if state is None else state
    manifest = state.get("manifest") if isinstance(state.get("manifest"), dict) else None
    info = None
    auto_minutes = auto_idle_minutes()
    if manifest:
        info = {**manifest, "stale": _stale(manifest.get("published_at", ""))}
    return {
        "install_kind": INSTALL_KIND,
        "channel": (manifest or {}).get("channel", "stable"),
        "current_version": VERSION,
        # `auto` while `update_auto` applies an announced release after that many idle minutes.
        "apply": "auto" if auto_minutes else "manual",
        "auto_idle_minutes": auto_minutes,
        "channel_hint": "git pull && make run",
        "check_disabled": check_disabled(),
        "available": bool(manifest and is_newer(manifest["version"])),
        "manifest": info,
        "last_checked_unix": state.get("last_checked_unix"),
        "last_error": state.get("last_error"),
        "not_published": bool(state.get("not_published")),
        "apply_supported": True,
        # Additive: why no update can be reported at all (no pinned key, disabled, no URL).
        "refused": refused_reason(),
        "note": "apply an available release with POST /api/v1/update/apply (the dashboard's "
        "Apply button) when it names its archive, else with the channel_hint command",
        # Additive: the last apply job and its log (docs/updates.md), null when none ran.
        "job": _job(),
    }


def auto_idle_minutes() -> int:
    """`update_auto` (0: off); a broken file value reads as off."""
    try:
        return int(store.get("update_auto") or 0)
    except (OSError, ValueError, TypeError):
        return 0


def _job() -> dict | None:
    journal = update_journal.load()
    if not journal:
        return None
    keys = ("id", "state", "step", "from", "to", "error", "by")
    return {**{k: journal.get(k) for k in keys}, "log": list(journal.get("log") or [])[-40:]}
