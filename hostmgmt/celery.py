"""The Celery app: hooks, webhooks, library scans and the streaming engine run here."""

import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "hostmgmt.settings")

app = Celery("hostmgmt")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()

# Periodic work, run by the worker's embedded beat (`--beat` in the supervisor's child specs).
app.conf.beat_schedule = {
    "update-check": {"task": "hostmgmt.tasks.check_for_update", "schedule": 6 * 3600.0},
}
