"""The unified library: installed-store titles merged with custom and provider entries.

Other apps call these functions (never the views):
- `list_library(provider=None, platform=None) -> list[dict]` — GameEntry dicts, sorted by title.
- `launch_info(entry_id) -> dict | None` — what the streaming engine needs to start an entry:
  `{id, title, store, launch, prep, detect, install_dir}` (prep only for custom entries).
- `rescan(store)` / `rescan_all()` — rebuild the installed-title cache from the store files.

Every mutation emits `library.changed` with its `source` (`manual`, the provider id or the
scanner id) after its transaction commits.
"""

from __future__ import annotations

import hashlib
import heapq
import json
import logging
import re
import time

from django.db import transaction
from django.db.models import Count, Max
from django.utils import timezone

from common import dbversion
from common.errors import Conflict, Invalid, NotFound
from hooks import event_kinds, events
from library.models import CustomEntry, InstalledTitle, ScannerState
from library.scanners import SCANNERS

log = logging.getLogger("library")

CUSTOM_ID = re.compile(r"^[0-9a-f]{12}$")
PROVIDER_ID = re.compile(r"^[a-z0-9][a-z0-9._-]{0,63}$")
META_KEYS = (
    "platform",
    "description",
    "developer",
    "publisher",
    "release_year",
    "genres",
    "tags",
    "region",
    "players",
)


def emit_changed(source: str) -> None:
    """`library.changed{source}` once the surrounding transaction (if any) commits."""
    # emit() waits for the commit by itself and never raises into its caller.
    events.emit(event_kinds.LIBRARY_CHANGED, {"source": source})


# -- listing ---------------------------------------------------------------------------------
def _custom_listing(row: CustomEntry) -> dict:
    data = row.data
    out = {"id": f"custom:{row.id}", "store": "custom", "title": row.title}
    out["art"] = dict(data.get("art") or {})
    if data.get("launch"):
        out["launch"] = data["launch"]
    if row.provider:
        out["provider"] = row.provider
    for key in META_KEYS:
        if key in data:
            out[key] = data[key]
    return out


_listing_cache: dict = {}


def _fingerprint() -> tuple:
    """Changes whenever a rescan, custom or provider write lands, in any process."""
    return (
        ScannerState.objects.aggregate(n=Count("id"), t=Max("scanned_at"), c=Max("count")),
        CustomEntry.objects.aggregate(n=Count("id"), t=Max("updated_at")),
    )


def list_library(provider: str | None = None, platform: str | None = None) -> list[dict]:
    """GameEntry dicts sorted by lowercase title; `provider` exact, `platform` any case.

    The unfiltered listing is kept in memory until the database fingerprint moves; callers must
    not mutate the dicts they get.
    """
    if not provider and not platform:
        return list(_cached()["entries"])
    return _merged(provider, platform)


def library_json() -> bytes:
    """The unfiltered listing already encoded: encoding 5,000+ entries costs more than reading
    them, so the bytes are cached with the entries."""
    cached = _cached()
    if cached.get("json") is None:
        cached["json"] = json.dumps(
            cached["entries"], ensure_ascii=False, separators=(",", ":")
        ).encode("utf-8")
    return cached["json"]


def _cached() -> dict:
    key = dbversion.cached("library.fingerprint", _fingerprint)
    cached = _listing_cache.get("current")
    if cached is None or cached["key"] != key:
        cached = {"key": key, "entries": _merged(None, None), "json": None}
        _listing_cache["current"] = cached
    return cached


def _merged(provider: str | None, platform: str | None) -> list[dict]:
    custom = CustomEntry.objects.all()
    installed = InstalledTitle.objects.all()
    if provider:
        custom = custom.filter(provider=provider)
        installed = installed.none()
    if platform:
        key = platform.lower()
        custom = custom.filter(platform_key=key)
        installed = installed.filter(platform_key=key)
    a = ((k, i, e) for k, i, e in installed.values_list("title_key", "id", "entry"))
    b = ((r.title_key, f"custom:{r.id}", _custom_listing(r)) for r in custom)
    return [entry for _k, _i, entry in heapq.merge(a, b, key=lambda t: (t[0], t[1]))]


def launch_info(entry_id: str) -> dict | None:
    if entry_id.startswith("custom:"):
        row = CustomEntry.objects.filter(pk=entry_id[7:]).first()
        if row is None:
            return None
        data = row.data
        return {
            "id": entry_id,
            "title": row.title,
            "store": "custom",
            "launch": data.get("launch"),
            "prep": list(data.get("prep") or []),
            "detect": dict(data.get("detect") or {}),
            "install_dir": (data.get("detect") or {}).get("install_dir", ""),
        }
    row = InstalledTitle.objects.filter(pk=entry_id).first()
    if row is None:
        return None
    return {
        "id": row.id,
        "title": row.entry.get("title", ""),
        "store": row.store,
        "launch": row.entry.get("launch"),
        "prep": [],
        "detect": dict(row.detect),
        "install_dir": row.install_dir,
    }


# -- rescans ---------------------------------------------------------------------------------
def scanner_enabled(store: str) -> bool:
    state = ScannerState.objects.filter(pk=store).first()
    return state.enabled if state else True


def signature(store: str) -> str:
    return json.dumps(SCANNERS[store].signature())


def rescan(store: str, force_emit: bool = False) -> int:
    """Replace `store`'s cached titles with what its files say now; emits only on a change.
    Its progress (begun, done, failed and why) is kept in its ScannerState for the console."""
    scanner = SCANNERS[store]
    ScannerState.objects.update_or_create(pk=store, defaults={"started_at": timezone.now()})
    try:
        return _rescan(store, scanner, force_emit)
    except Exception as exc:
        ScannerState.objects.filter(pk=store).update(
            error=f"{exc.__class__.__name__}: {exc}"[:512], scanned_at=timezone.now()
        )
        raise


def _rescan(store: str, scanner, force_emit: bool) -> int:
    sig = signature(store)  # taken first: a change during the scan triggers another one
    titles = scanner.scan() if scanner_enabled(store) else []
    new = {}
    for t in titles:
        new[t.id] = InstalledTitle(
            id=t.id,
            store=store,
            title_key=t.title.lower(),
            platform_key=t.platform.lower(),
            install_dir=t.install_dir,
            entry=t.entry(),
            detect=t.detect,
        )
    with transaction.atomic():
        old = {
            i: (e, d, inst)
            for i, e, d, inst in InstalledTitle.objects.filter(store=store).values_list(
                "id", "entry", "detect", "install_dir"
            )
        }
        stale = [i for i in old if i not in new or old[i] != _cmp(new[i])]
        fresh = [row for i, row in new.items() if i not in old or i in stale]
        for n in range(0, len(stale), 500):
            InstalledTitle.objects.filter(pk__in=stale[n : n + 500]).delete()
        InstalledTitle.objects.bulk_create(fresh, batch_size=500)
        ScannerState.objects.update_or_create(
            pk=store,
            defaults={
                "signature": sig,
                "count": len(new),
                "scanned_at": timezone.now(),
                "error": "",
            },
        )
        if stale or fresh or force_emit:
            emit_changed(store)
    if stale or fresh:
        log.info("library %s rescan: %d titles (%d changed)", store, len(new), len(fresh))
    return len(new)


def _cmp(row: InstalledTitle) -> tuple:
    return (row.entry, row.detect, row.install_dir)


def rescan_all() -> dict[str, int]:
    out = {}
    for store in SCANNERS:
        try:
            out[store] = rescan(store)
        except Exception:  # one store's surprise must not stop the others
            log.exception("rescan of %s failed", store)
    return out


def _when(value) -> str | None:
    return value.isoformat().replace("+00:00", "Z") if value else None


def scan_state(state: ScannerState | None) -> str:
    """Where a store's rescan stands: `queued` (asked for, not begun), `scanning`, `failed`
    (its last scan raised; `error` says why) or `done`; `never` before its first scan."""
    if state is None or (state.scanned_at is None and state.started_at is None):
        return "queued" if state is not None and state.requested_at else "never"
    done, begun = state.scanned_at, state.started_at
    if begun and (done is None or begun > done):
        return "scanning"
    if state.requested_at and (done is None or state.requested_at > done):
        return "queued"
    return "failed" if state.error else "done"


def list_scanners() -> list[dict]:
    states = {s.id: s for s in ScannerState.objects.all()}
    out = []
    for sid, mod in SCANNERS.items():
        state = states.get(sid)
        out.append(
            {
                "id": sid,
                "label": mod.LABEL,
                "enabled": state.enabled if state else True,
                "state": scan_state(state),
                "count": state.count if state else 0,
                "scanned_at": _when(state.scanned_at) if state else None,
                "error": state.error if state else "",
            }
        )
    return out


def request_rescan() -> str:
    """Mark every store as asked for (the console shows each one's progress); returns when."""
    now = timezone.now()
    for store in SCANNERS:
        ScannerState.objects.update_or_create(pk=store, defaults={"requested_at": now})
    return _when(now)


def set_scanner(store: str, enabled: bool) -> list[dict]:
    if store not in SCANNERS:
        raise NotFound("no such scanner")
    state, _ = ScannerState.objects.get_or_create(pk=store)
    if state.enabled != enabled:
        state.enabled = enabled
        state.save(update_fields=["enabled"])
        rescan(store, force_emit=True)
    return list_scanners()


# -- custom entries --------------------------------------------------------------------------
def _new_id(seed: str) -> str:
    while True:
        digest = hashlib.sha256(f"{seed}:{time.time_ns()}".encode()).hexdigest()[:12]
        if not CustomEntry.objects.filter(pk=digest).exists():
            return digest


def _split(data: dict) -> tuple[str, dict]:
    """Title and the stored `data` blob of a validated CustomInput."""
    body = {k: v for k, v in data.items() if k not in ("title", "external_id")}
    body["art"] = body.get("art") or {}
    return data["title"], body


def custom_record(row: CustomEntry, private: bool = False) -> dict:
    """The CustomEntry form with its bare id; `detect` and `prep` name local paths and commands,
    so only `private` (GET of one entry, admin token) shows them."""
    data = row.data
    out = {"id": row.id, "title": row.title, "art": dict(data.get("art") or {})}
    if data.get("launch"):
        out["launch"] = data["launch"]
    if private and data.get("prep"):
        out["prep"] = data["prep"]
    if row.provider:
        out["provider"] = row.provider
        out["external_id"] = row.external_id
    if private and data.get("detect"):
        out["detect"] = data["detect"]
    for key in META_KEYS:
        if key in data:
            out[key] = data[key]
    return out


def _apply(row: CustomEntry, data: dict) -> None:
    row.title, row.data = _split(data)
    row.title_key = row.title.lower()
    row.platform_key = str(row.data.get("platform") or "").lower()


def _manual_row(entry_id: str) -> CustomEntry:
    row = CustomEntry.objects.filter(pk=entry_id).first() if CUSTOM_ID.match(entry_id) else None
    if row is None:
        raise NotFound("no custom entry with that id")
    if row.provider:
        raise Conflict(f"entry is owned by provider {row.provider}; edit it through its sync")
    return row


def create_custom(data: dict) -> dict:
    with transaction.atomic():
        row = CustomEntry(id=_new_id(data["title"]))
        _apply(row, data)
        row.save(force_insert=True)
        emit_changed("manual")
    return custom_record(row)


def get_custom(entry_id: str) -> dict:
    return custom_record(_manual_row(entry_id), private=True)


def update_custom(entry_id: str, data: dict) -> dict:
    with transaction.atomic():
        row = _manual_row(entry_id)
        _apply(row, data)
        row.save()
        emit_changed("manual")
    return custom_record(row)


def delete_custom(entry_id: str) -> None:
    with transaction.atomic():
        _manual_row(entry_id).delete()
        emit_changed("manual")


# -- provider entries ------------------------------------------------------------------------
def check_provider(provider: str) -> None:
    if not PROVIDER_ID.match(provider) or provider == "manual":
        raise Invalid("provider id must be 1-64 of [a-z0-9._-], not 'manual'")


def reconcile(provider: str, items: list[dict]) -> list[dict]:
    """Make `provider`'s entries exactly `items`: ids survive per external_id, orphans go."""
    check_provider(provider)
    seen: dict[str, int] = {}
    errors = {}
    for i, item in enumerate(items):
        ext = item["external_id"]
        if ext in seen:
            errors[f"[{i}].external_id"] = f"duplicate of entry {seen[ext]}"
        seen[ext] = i
    if errors:
        raise Invalid("invalid provider entries", fields=errors)
    with transaction.atomic():
        existing = {r.external_id: r for r in CustomEntry.objects.filter(provider=provider)}
        out = []
        for item in items:
            row = existing.pop(item["external_id"], None)
            if row is None:
                row = CustomEntry(
                    id=_new_id(f"{provider}:{item['external_id']}"),
                    provider=provider,
                    external_id=item["external_id"],
                )
            _apply(row, item)
            row.save()
            out.append(custom_record(row))
        if existing:
            CustomEntry.objects.filter(pk__in=[r.id for r in existing.values()]).delete()
        emit_changed(provider)
    return out


def remove_provider(provider: str) -> int:
    check_provider(provider)
    with transaction.atomic():
        removed, _ = CustomEntry.objects.filter(provider=provider).delete()
        if removed:
            emit_changed(provider)
    return removed
