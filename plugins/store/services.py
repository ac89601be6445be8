"""The store as the API sees it: sources, the merged catalog, installed packages and jobs.

Views call these functions only; each raises a `common.errors` refusal with the message
the caller sees. Every change of what the store offers or holds emits `store.changed` (source
put/delete, a forced refresh, a job's end).
"""

from __future__ import annotations

import re
import time
from concurrent.futures import ThreadPoolExecutor
from urllib.parse import unquote, urlsplit

from common.errors import Conflict, DomainError, Invalid, NotFound
from common.version import VERSION
from hooks import event_kinds, events, ssrf
from plugins import env, runner_control, tasks
from plugins.store import catalog, conf, jobs, netfetch, provenance, sources

SPEC_SHA = re.compile(r"sha256=([0-9a-f]{64})")
WHEEL_FILE = re.compile(r"([A-Za-z0-9_.]+)-([0-9A-Za-z.+!]+)-py3-none-any\.whl")
JOB_ID = re.compile(r"job-[0-9]{1,12}-[0-9]{1,12}")


def _changed() -> None:
    events.emit(event_kinds.STORE_CHANGED, {})


# -- sources ---------------------------------------------------------------------------------
def _source_view(source: sources.Source, record: dict) -> dict:
    return {
        "name": source.name,
        "url": source.url,
        "builtin": source.builtin,
        "signed": source.signed,
        "stale": catalog.is_stale(record),
        "fetched_at": record.get("fetched_at"),
        "error": record.get("error") or None,
        "entry_count": len(record.get("entries") or []),
        "public_key": source.public_key or None,
    }


def list_sources() -> list[dict]:
    """Every source with what its cache says (no fetch: listing stays fast)."""
    return [_source_view(s, catalog.read_cache(s)) for s in sources.all_sources()]


def put_source(name: str, body) -> None:
    if not isinstance(body, dict):
        raise Invalid("the body must be a JSON object")
    if sources.put(name, body.get("url"), body.get("public_key", "")):
        catalog.forget(name)
        _changed()


def delete_source(name: str) -> None:
    if sources.delete(name):
        catalog.forget(name)
        _changed()


# -- the catalog -----------------------------------------------------------------------------
def _version_key(text: str) -> tuple[int, ...]:
    return tuple(int(n) for n in re.findall(r"\d+", text or "")[:4])


def _compatibility(entry: dict) -> str | None:
    if catalog.PLATFORM not in entry["platforms"]:
        return f"not built for {catalog.PLATFORM} (platforms: {', '.join(entry['platforms'])})"
    if entry["min_host"] and _version_key(entry["min_host"]) > _version_key(VERSION):
        return f"needs host {entry['min_host']} or newer (this is {VERSION})"
    return None


def _tier(source: sources.Source) -> str:
    if source.builtin and source.signed:
        return "verified"
    return "external" if source.signed else "unverified"


def _records(force: bool) -> list[tuple[sources.Source, dict]]:
    all_sources = sources.all_sources()
    with ThreadPoolExecutor(max_workers=min(8, len(all_sources))) as pool:
        records = list(pool.map(lambda s: catalog.current(s, force=force), all_sources))
    return list(zip(all_sources, records, strict=True))


def _entry_view(source: sources.Source, entry: dict, installed: dict[str, str]) -> dict:
    problem = _compatibility(entry)
    have = installed.get(entry["pkg"])
    out = {
        "id": entry["id"], "pkg": entry["pkg"], "title": entry["title"],
        "description": entry["description"], "author": entry["author"],
        "version": entry["version"], "source": source.name, "tier": _tier(source),
        "signed": source.signed, "platforms": entry["platforms"],
        "compatible": problem is None, "update_available": bool(have and have != entry["version"]),
    }  # fmt: skip
    optional = {
        "icon": entry["icon"], "homepage": entry["homepage"], "license": entry["license"],
        "reviewed_at": entry["reviewed_at"] if source.builtin else "",
        "min_host": entry["min_host"], "incompatible_reason": problem,
        "installed_version": have, "blocked": entry["blocked"],
    }  # fmt: skip
    out.update({k: v for k, v in optional.items() if v})
    return out


def _installed_versions() -> dict[str, str]:
    return env.installed_packages()


def _busy() -> bool:
    try:
        return jobs.holder() is not None
    except Exception:  # the catalog still answers with Redis down
        return False


def catalog_response(*, force: bool = False) -> dict:
    installed = _installed_versions()
    pairs = _records(force)
    entries = [
        _entry_view(s, e, installed) for s, record in pairs for e in record.get("entries") or []
    ]
    entries.sort(key=lambda e: (e["title"].lower(), e["source"]))
    return {
        "host": {"version": VERSION, "platform": catalog.PLATFORM},
        "sources": [_source_view(s, r) for s, r in pairs],
        "plugins": entries,
        "busy": _busy(),
    }


def refresh() -> dict:
    out = catalog_response(force=True)
    _changed()
    return out


# -- installed -------------------------------------------------------------------------------
def _running_ids() -> set[str]:
    try:
        return {pid for pid, st in runner_control.status().items() if st.get("running")}
    except Exception:  # a broken status file is "nothing known to run"
        return set()


def installed_view() -> list[dict]:
    """Every `host-plugin-*` package in the plugin environment, read from its files. A package
    whose plugin id another distribution also declares is listed with `conflict` (neither runs)."""
    records = provenance.read_all()
    running = _running_ids()
    offered = {}
    for source in sources.all_sources():
        for e in catalog.read_cache(source).get("entries") or []:
            offered[(source.name, e["id"])] = e
    found = env.scan()
    ids = {p.pkg: p.plugin_id for p in found.plugins}
    clash = {}
    for plugin_id, decls in found.conflicts.items():
        for d in decls:
            others = ", ".join(sorted({o.pkg for o in decls} - {d.pkg})) or f"another {d.pkg}"
            ids.setdefault(d.pkg, plugin_id)
            clash[d.pkg] = f"plugin id {plugin_id} is also declared by {others}: none of them runs"
    out = []
    for pkg, version in found.packages.items():
        rec = records.get(pkg)
        plugin_id = ids.get(pkg)
        row = {"pkg": pkg, "tier": rec.get("tier", "cli") if rec else "cli",
               "running": plugin_id in running and pkg not in clash, "version": version,
               "plugin_id": plugin_id, "conflict": clash.get(pkg)}  # fmt: skip
        if rec:
            row.update(
                source=rec.get("source"),
                entry_id=rec.get("entry_id"),
                title=rec.get("title"),
                installed_at=_iso(rec.get("installed_at")),
            )
            entry = offered.get((rec.get("source"), rec.get("entry_id")))
            if entry and entry["version"] != version:
                row["update_available"] = entry["version"]
            if entry and entry["blocked"]:
                row["blocked"] = entry["blocked"]
        out.append({k: v for k, v in row.items() if v is not None and v != ""})
    return sorted(out, key=lambda r: r["pkg"])


def _iso(ts) -> str | None:
    if not ts:
        return None
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(int(ts)))


# -- jobs ------------------------------------------------------------------------------------
def _plan_from_entry(body: dict) -> dict:
    name, entry_id = body.get("source"), body.get("id")
    if not isinstance(name, str) or not isinstance(entry_id, str):
        raise Invalid("source and id must be strings")
    source = sources.get(name)
    if source is None:
        raise Invalid(f"no source named {name!r}", fields={"source": "unknown source"})
    record = catalog.current(source)
    entry = next((e for e in record.get("entries") or [] if e["id"] == entry_id), None)
    if entry is None:
        why = f" ({record['error']})" if record.get("error") else ""
        raise Invalid(f"source {name!r} offers no entry {entry_id!r}{why}",
                      fields={"id": "unknown entry"})  # fmt: skip
    if entry["blocked"]:
        raise Invalid(f"{entry_id} is blocked by its source: {entry['blocked']}")
    problem = _compatibility(entry)
    if problem:
        raise Invalid(f"{entry_id} is not compatible with this host: {problem}")
    if not source.signed and body.get("accept_unverified") is not True:
        raise Invalid(
            f"source {name!r} is unsigned: installing from it needs accept_unverified: true",
            fields={"accept_unverified": "required"},
        )
    return {**entry, "source": name, "tier": _tier(source), "allow_loopback": source.loopback}


def _plan_from_spec(body: dict) -> dict:
    spec = body.get("spec")
    if not isinstance(spec, str) or len(spec) > conf.MAX_URL + 80:
        raise Invalid("spec must be a wheel URL", fields={"spec": "too long or not a string"})
    try:
        netfetch.check_url(spec, allow_loopback=True)
    except ssrf.UrlRefused as exc:
        raise Invalid(f"spec {exc}", fields={"spec": str(exc)}) from None
    parts = urlsplit(spec)
    sha = SPEC_SHA.fullmatch(parts.fragment)
    filename = unquote(parts.path.rsplit("/", 1)[-1])
    wheel = WHEEL_FILE.fullmatch(filename)
    if not sha or not wheel:
        raise Invalid("spec must be https://.../<name>-<version>-py3-none-any.whl#sha256=<hex>",
                      fields={"spec": "not a pinned wheel URL"})  # fmt: skip
    pkg = env.normalize_dist(wheel.group(1))
    if not env.DIST_NAME.fullmatch(pkg):
        raise Invalid(f"{pkg} is not a plugin package name ({env.DIST_PREFIX}*)")
    return {"id": pkg[len(env.DIST_PREFIX) :], "pkg": pkg, "version": wheel.group(2),
            "wheel_url": parts._replace(fragment="").geturl(), "sha256": sha.group(1),
            "title": pkg, "source": None, "tier": "unverified", "allow_loopback": True}  # fmt: skip


def _queue(kind: str, target: str, plan: dict) -> dict:
    job_id = jobs.new_id()
    if not jobs.acquire(job_id):
        raise Conflict(f"another package job is running ({jobs.holder()}); one at a time")
    try:
        job = jobs.Job.create(job_id, kind, target, plan)
    except BaseException:
        jobs.release(job_id)
        raise
    try:
        tasks.run_store_job.delay(job_id)
    except Exception as exc:  # no broker: the job cannot run
        job.finish(f"could not queue the job ({type(exc).__name__})")
        jobs.release(job_id)
        raise DomainError("the host's task queue is out of reach", status=503,
                          retry_after=5) from None  # fmt: skip
    return {"job": job_id}


def start_install(body) -> dict:
    if not isinstance(body, dict):
        raise Invalid("the body must be a JSON object")
    keys = {k for k in ("source", "id", "spec") if body.get(k) not in (None, "")}
    accept = body.get("accept_unverified", False)
    if not isinstance(accept, bool):
        raise Invalid("accept_unverified must be a boolean")
    if keys == {"source", "id"}:
        plan = _plan_from_entry(body)
    elif keys == {"spec"} and accept:
        plan = _plan_from_spec(body)
    else:
        raise Invalid("give source and id, or spec with accept_unverified: true")
    return _queue("install", f"{plan['pkg']}@{plan['version']}", plan)


def start_uninstall(body) -> dict:
    pkg = body.get("pkg") if isinstance(body, dict) else None
    if not isinstance(pkg, str) or not env.DIST_NAME.fullmatch(pkg):
        raise Invalid(f"pkg must be an installed {env.DIST_PREFIX}* package",
                      fields={"pkg": "not a plugin package name"})  # fmt: skip
    if pkg not in env.installed_packages():
        raise Invalid(f"{pkg} is not an installed plugin package", fields={"pkg": "not installed"})
    return _queue("uninstall", pkg, {"pkg": pkg})


def list_jobs() -> list[dict]:
    return jobs.list_jobs()


def get_job(job_id: str) -> dict:
    job = jobs.Job.load(job_id) if JOB_ID.fullmatch(job_id or "") else None
    if job is None:
        raise NotFound("no such job (the last 20 are kept)")
    return jobs.view(job.data)
