"""Delivery records: what every hook firing and webhook attempt did, for the operator."""

from __future__ import annotations

from django.db import models


class Delivery(models.Model):
    """One hook firing or webhook attempt (or a firing that was dropped or refused).

    Rows are pruned by age (HOST_DELIVERY_RETENTION_DAYS). `target` never holds a URL's
    query string or credentials.
    """

    RUN = "run"
    WEBHOOK = "webhook"
    STREAM_WEBHOOK = "stream-webhook"
    PREP = "prep"
    CHANNELS = [
        (RUN, "hook command"),
        (WEBHOOK, "hook webhook"),
        (STREAM_WEBHOOK, "stream webhook"),
        (PREP, "prep step"),
    ]

    OK = "ok"
    FAILED = "failed"
    TIMEOUT = "timeout"
    DROPPED = "dropped"
    REFUSED = "refused"
    SKIPPED = "skipped"
    OUTCOMES = [
        (OK, "ok"),
        (FAILED, "failed"),
        (TIMEOUT, "timed out"),
        (DROPPED, "dropped (in-flight cap)"),
        (REFUSED, "refused"),
        (SKIPPED, "skipped"),
    ]

    created = models.DateTimeField(auto_now_add=True, db_index=True)
    channel = models.CharField(max_length=16, choices=CHANNELS)
    target = models.CharField(max_length=512, help_text="command or URL (without query)")
    event_kind = models.CharField(max_length=64, blank=True)
    event_seq = models.BigIntegerField(null=True, blank=True)
    outcome = models.CharField(max_length=16, choices=OUTCOMES)
    attempt = models.PositiveSmallIntegerField(default=1)
    exit_code = models.IntegerField(null=True, blank=True)
    http_status = models.IntegerField(null=True, blank=True)
    duration_ms = models.IntegerField(null=True, blank=True)
    error = models.TextField(blank=True)

    class Meta:
        ordering = ["-created", "-id"]
        verbose_name_plural = "deliveries"

    def __str__(self) -> str:
        return f"{self.channel} {self.event_kind} #{self.event_seq}: {self.outcome}"


class PrepRun(models.Model):
    """A prep `do` step that ran and whose `undo` is still owed (survives a crash)."""

    session_key = models.CharField(max_length=128, db_index=True)
    position = models.PositiveIntegerField()
    undo = models.TextField()
    app_env = models.JSONField(default=dict)
    created = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["session_key", "-position"]
        constraints = [
            models.UniqueConstraint(fields=["session_key", "position"], name="prep_step_once")
        ]

    def __str__(self) -> str:
        return f"{self.session_key} step {self.position}"
