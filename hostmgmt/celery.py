"""The Celery app: hooks, webhooks, library scans and the streaming engine run here."""

import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "hostmgmt.settings")

app = Celery("hostmgmt")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()
# No beat schedule: periodic work is the supervisor's (supervisor/periodic.py).
