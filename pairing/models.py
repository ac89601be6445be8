"""Paired clients and the PIN requests waiting for an operator."""

from __future__ import annotations

import uuid

from django.db import models
from django.utils import timezone

PLANE_COMPAT = "compat"
PLANE_NATIVE = "native"


def new_uuid() -> str:
    return str(uuid.uuid4()).upper()


class PairedClient(models.Model):
    """A client certificate the host trusts, pinned by its SHA-256 fingerprint.

    Disabled clients stay listed but are refused on every request until enabled again.
    """

    fingerprint = models.CharField(max_length=64, unique=True)  # lowercase hex SHA-256 of DER
    cert_pem = models.TextField()
    name = models.CharField(max_length=128, blank=True, default="")
    uuid = models.CharField(max_length=36, unique=True, default=new_uuid)
    enabled = models.BooleanField(default=True)
    plane = models.CharField(
        max_length=16,
        choices=[(PLANE_COMPAT, "compat"), (PLANE_NATIVE, "native")],
        default=PLANE_COMPAT,
    )
    paired_at = models.DateTimeField(default=timezone.now)
    last_seen = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["paired_at", "id"]

    def __str__(self) -> str:
        return f"{self.name or 'client'} ({self.fingerprint[:12]})"


class PinRequest(models.Model):
    """A pairing handshake parked at `getservercert`, waiting for the operator's PIN.

    The compat plane (its own process) creates the row and polls it; `POST /api/pin` (the web
    process) claims it by filling `key_hex` with the key derived from salt and PIN, so the PIN
    itself is never stored. Rows live for seconds; the listener deletes them when done.
    """

    fingerprint = models.CharField(max_length=64)
    device_name = models.CharField(max_length=128, blank=True, default="")
    remote_addr = models.CharField(max_length=64, blank=True, default="")
    salt_hex = models.CharField(max_length=32)
    created_at = models.DateTimeField(default=timezone.now)
    expires_at = models.DateTimeField()
    key_hex = models.CharField(max_length=32, blank=True, default="")
    client_name = models.CharField(max_length=128, blank=True, default="")

    class Meta:
        ordering = ["created_at", "id"]

    def __str__(self) -> str:
        return f"PIN request from {self.device_name or self.remote_addr}"
