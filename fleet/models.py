"""Fleet state kept in this host's database. A member's token is not here: it lives in
`fleet/member_tokens.py`'s 0600 file, so no database dump, admin page or fixture carries it."""

from django.db import models


class Member(models.Model):
    """A host this host manages. Identified to us by its URL and pinned certificate; the name
    is what it reports (shown, never trusted for identity)."""

    url = models.CharField(max_length=255, unique=True)  # https://host:port (normalised)
    fingerprint = models.CharField(max_length=64)  # sha256 of the leaf certificate (DER), hex
    name = models.CharField(max_length=64, blank=True, default="")
    created_at = models.DateTimeField(auto_now_add=True)
    # The last refresh: what the member's own API said, or why it could not be asked.
    reachable = models.BooleanField(default=False)
    error = models.CharField(max_length=300, blank=True, default="")
    refreshed_at = models.DateTimeField(null=True, blank=True)
    refresh_ms = models.FloatField(null=True, blank=True)
    view = models.JSONField(default=dict, blank=True)  # version, sessions, gpus, displays, ...
    # The member's own event sequence number this host has relayed up to (fleet/relay.py).
    event_seq = models.BigIntegerField(default=0)

    class Meta:
        ordering = ["id"]

    def __str__(self) -> str:
        return f"{self.name or '?'} ({self.url})"
