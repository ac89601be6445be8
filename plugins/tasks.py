"""Celery tasks of the plugins app: thin wrappers (the store's package jobs run here, on the
default worker, one at a time by the store's own lock)."""

from __future__ import annotations

from celery import shared_task

from plugins.store import install


@shared_task(name="plugins.store_job", ignore_result=True, acks_late=False)
def run_store_job(job_id: str) -> None:
    install.run(job_id)
