"""What the library keeps in the database: scanned titles, custom/provider entries, scanners.

Installed titles are a cache of the store files (rebuilt by every rescan); custom and provider
entries are the host's own records; the compat app catalog lives in `apps.json`, not here.
"""

from __future__ import annotations

from django.db import models


class InstalledTitle(models.Model):
    """One title a store scanner found installed; replaced wholesale by that store's rescan."""

    id = models.CharField(primary_key=True, max_length=300)
    store = models.CharField(max_length=16, db_index=True)
    title_key = models.CharField(max_length=300, db_index=True)  # lowercase title, for sorting
    platform_key = models.CharField(max_length=64, default="pc")
    install_dir = models.TextField(blank=True, default="")
    entry = models.JSONField()  # the GameEntry as the listing serves it
    detect = models.JSONField(default=dict)

    class Meta:
        ordering = ["title_key", "id"]

    def __str__(self) -> str:
        return self.entry.get("title", self.id)


class CustomEntry(models.Model):
    """A manual entry (provider empty) or one owned by a provider's reconcile."""

    id = models.CharField(primary_key=True, max_length=12)
    title = models.CharField(max_length=256)
    title_key = models.CharField(max_length=256, db_index=True)
    platform_key = models.CharField(max_length=64, blank=True, default="")
    provider = models.CharField(max_length=64, blank=True, default="", db_index=True)
    external_id = models.CharField(max_length=256, blank=True, default="")
    data = models.JSONField()  # CustomEntry fields besides id/title/provider/external_id
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["title_key", "id"]
        verbose_name_plural = "custom entries"
        constraints = [
            models.UniqueConstraint(
                fields=["provider", "external_id"],
                condition=~models.Q(provider=""),
                name="library_unique_provider_external_id",
            )
        ]

    def __str__(self) -> str:
        return self.title


class ScannerState(models.Model):
    """Per store scanner: enabled switch, the file signature of the last scan, its outcome."""

    id = models.CharField(primary_key=True, max_length=16)
    enabled = models.BooleanField(default=True)
    signature = models.TextField(blank=True, default="")
    count = models.IntegerField(default=0)
    scanned_at = models.DateTimeField(null=True, blank=True)
    # A rescan's progress, for the console: asked for (POST /library/scan), begun, failed.
    requested_at = models.DateTimeField(null=True, blank=True)
    started_at = models.DateTimeField(null=True, blank=True)
    error = models.CharField(max_length=512, blank=True, default="")

    def __str__(self) -> str:
        return self.id
