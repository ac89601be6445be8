"""Delivery records: pruned by age, URLs stored without secrets, visible in the Django admin."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from hooks import deliveries
from hooks.models import Delivery


@pytest.mark.django_db
def test_prune_by_age():
    deliveries.record("run", "echo old", {"kind": "store.changed", "seq": 1}, "ok")
    deliveries.record("run", "echo new", {"kind": "store.changed", "seq": 2}, "ok")
    Delivery.objects.filter(target="echo old").update(created=timezone.now() - timedelta(days=30))
    assert deliveries.prune(days=14) == 1
    assert list(Delivery.objects.values_list("target", flat=True)) == ["echo new"]


def test_safe_url_drops_credentials_and_query():
    url = "https://user:pw@hooks.example.com:8443/path?token=abc#frag"
    assert deliveries.safe_url(url) == "https://hooks.example.com:8443/path"


@pytest.mark.django_db
def test_admin_lists_deliveries(admin_client):
    event = {"kind": "host.started", "seq": 3}
    deliveries.record("webhook", "https://h.example/x", event, "failed", http_status=500)
    r = admin_client.get("/admin/hooks/delivery/", secure=True)
    assert r.status_code == 200 and b"https://h.example/x" in r.content
