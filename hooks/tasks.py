"""Celery tasks of the hooks app: thin wrappers, served by the dedicated `hooks` worker."""

from __future__ import annotations

import logging

from celery import shared_task
from celery.signals import worker_shutting_down

from hooks import conf, prep, runner, services, stream_webhooks

log = logging.getLogger("hooks")


@worker_shutting_down.connect
def _stop_running_commands(**_kwargs) -> None:
    """A stopping worker ends the hook commands it runs (their whole process groups) at once.

    The supervisor has already given the `host.stopping` hooks their grace period
    (HOST_STOPPING_HOOKS_GRACE_S) before it stops the workers; whatever still runs now would
    otherwise hold the worker's warm shutdown, then outlive it in a session of its own.
    """
    killed = runner.kill_running()
    if killed:
        log.warning("worker stopping: killed %d running hook command(s)", killed)


@shared_task(name="hooks.fire", queue=conf.HOOKS_QUEUE, ignore_result=True)
def fire(event: dict, action: str, entry: dict, permit: str | None = None) -> None:
    services.fire(event, action, entry, permit)


@shared_task(name="hooks.record_drop", queue=conf.HOOKS_QUEUE, ignore_result=True)
def record_drop(event: dict, action: str, entry: dict) -> None:
    services.record_drop(event, action, entry)


@shared_task(
    bind=True,
    name="hooks.stream_webhook",
    queue=conf.HOOKS_QUEUE,
    ignore_result=True,
    max_retries=conf.STREAM_WEBHOOK_RETRIES,
)
def stream_webhook(self, url: str, body_text: str, signature: str | None) -> None:
    retry = stream_webhooks.deliver(
        url, body_text.encode(), signature, attempt=self.request.retries + 1
    )
    if retry and self.request.retries < self.max_retries:
        raise self.retry(countdown=stream_webhooks.backoff_s(self.request.retries))


@shared_task(name="hooks.prep_undo_orphans", queue=conf.HOOKS_QUEUE, ignore_result=True)
def prep_undo_orphans() -> None:
    """Queued at host start: no session survives a restart, so every owed undo is an orphan."""
    prep.undo_orphans()
