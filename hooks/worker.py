"""The dedicated Celery worker for hook commands and webhooks (a child of the supervisor).

A threads pool on its own queue: a hook command may run for up to 600 s, and in the shared
prefork worker a few of those would starve library scans and the streaming engine. The
in-flight cap (8) bounds running firings; the pool has headroom so a firing never waits for a
thread behind others.
"""

from __future__ import annotations

from hooks import conf


def worker_argv(python: str, base_port: int) -> list[str]:
    return [
        python, "-m", "celery", "-A", "hostmgmt", "worker",
        "--loglevel", "INFO",
        "--queues", conf.HOOKS_QUEUE,
        "--pool", "threads",
        "--concurrency", str(conf.HOOKS_WORKER_CONCURRENCY),
        "--hostname", f"hooks-{base_port}@%h",
        "--without-gossip", "--without-mingle", "--without-heartbeat",
    ]  # fmt: skip
