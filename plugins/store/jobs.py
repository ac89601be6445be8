"""Package jobs: one record per job in `<state>/plugins/store/jobs/<id>.json` (the last 20
kept), and the single-flight lock in Redis (one install or uninstall at a time across every
process of the host: pip must never run twice on one environment).

The lock is taken by the API request that queues the job and released by the worker when the
job ends; it expires on its own after the job timeout plus a margin, so a worker that died
mid-job blocks the store for at most that long. A record still `running` past that time is
reported as failed ("timed out").
"""

from __future__ import annotations

import json
import os
import time
from collections import deque

from common import redis_client
from common.files import atomic_write
from plugins.store import conf

LOCK_TTL_S = conf.JOB_TIMEOUT_S + 30
_RELEASE = """
if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) end
return 0
"""


def acquire(job_id: str) -> bool:
    return bool(redis_client.client().set(conf.LOCK_KEY, job_id, nx=True, ex=LOCK_TTL_S))


def release(job_id: str) -> None:
    redis_client.client().eval(_RELEASE, 1, conf.LOCK_KEY, job_id)


def holder() -> str | None:
    value = redis_client.client().get(conf.LOCK_KEY)
    return value.decode() if isinstance(value, bytes) else value


def new_id() -> str:
    return f"job-{int(time.time())}-{int(redis_client.client().incr(conf.COUNTER_KEY))}"


def _path(job_id: str):
    return conf.sub_dir("jobs") / f"{job_id}.json"


class Job:
    """A job's record, rewritten (atomically) at every phase and log line."""

    def __init__(self, data: dict):
        self.data = data
        self._log = deque(data.get("log", []), maxlen=conf.JOB_LOG_LINES)

    @classmethod
    def create(cls, job_id: str, kind: str, target: str, plan: dict) -> Job:
        job = cls({"id": job_id, "kind": kind, "target": target, "state": "running",
                   "phase": "queued", "log": [], "error": None, "started_at": int(time.time()),
                   "finished_at": None, "plan": plan})  # fmt: skip
        job.save()
        _trim()
        return job

    @classmethod
    def load(cls, job_id: str) -> Job | None:
        try:
            return cls(json.loads(_path(job_id).read_text(encoding="utf-8")))
        except (FileNotFoundError, ValueError, OSError):
            return None

    @property
    def id(self) -> str:
        return self.data["id"]

    def save(self, durable: bool = False) -> None:
        self.data["log"] = list(self._log)
        atomic_write(_path(self.id), json.dumps(self.data), durable=durable)

    def phase(self, phase: str) -> None:
        self.data["phase"] = phase
        self._log.append(f"-- {phase}")
        self.save()

    def log(self, text: str) -> None:
        for line in str(text).splitlines():
            line = "".join(c for c in line if c.isprintable())[:500]
            if line.strip():
                self._log.append(line)
        self.save()

    def finish(self, error: str | None = None) -> None:
        self.data["state"] = "failed" if error else "done"
        if not error:
            self.data["phase"] = "done"
        self.data["error"] = error
        self.data["finished_at"] = int(time.time())
        self._log.append(f"failed: {error}" if error else "-- done")
        self.save(durable=True)


def view(data: dict) -> dict:
    """The Job record of the API (the plan stays internal)."""
    out = {k: data.get(k) for k in ("id", "kind", "target", "state", "phase", "log", "error",
                                    "started_at", "finished_at")}  # fmt: skip
    if out["state"] == "running" and time.time() - (out["started_at"] or 0) > LOCK_TTL_S:
        out.update(state="failed", error="timed out (the worker stopped before the job ended)")
    return out


def _all() -> list[dict]:
    out = []
    for path in conf.sub_dir("jobs").glob("job-*.json"):
        try:
            out.append(json.loads(path.read_text(encoding="utf-8")))
        except (ValueError, OSError):
            continue

    def order(d):
        parts = str(d.get("id", "")).split("-")
        return (d.get("started_at") or 0, int(parts[-1]) if parts[-1].isdigit() else 0)

    return sorted(out, key=order)


def list_jobs() -> list[dict]:
    return [view(d) for d in _all()]


def _trim() -> None:
    rows = _all()
    for data in rows[: max(0, len(rows) - conf.JOBS_KEPT)]:
        try:
            os.unlink(_path(data["id"]))
        except (FileNotFoundError, KeyError):
            pass
