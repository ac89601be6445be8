"""The console's hook routes: test-fire one saved hook and read the delivery log.

Real Redis (permits), real `sh` commands run by the worker's own code path (`services.fire`);
only the Celery hand-off is captured, and then performed in process as the worker would.
"""

from __future__ import annotations

import pytest
from rest_framework.test import APIClient

from hooks import dispatch, hook_config, services
from hooks.models import Delivery

TOKEN = "cd" * 32


@pytest.fixture
def mgmt(monkeypatch, db):
    monkeypatch.setenv("HOST_MGMT_TOKEN", TOKEN)
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {TOKEN}")
    return client


@pytest.fixture
def sent(monkeypatch):
    calls: list = []
    monkeypatch.setattr(dispatch, "_send", lambda name, args: calls.append((name, args)) or True)
    return calls


def _save(entries):
    hook_config.save(hook_config.validate({"hooks": entries}))


def test_test_fire_queues_each_action_and_the_worker_records_exit_codes(
    bus, redis_db, sent, mgmt, tmp_path
):
    out = tmp_path / "event.json"
    _save(
        [
            {"on": "library.changed", "run": "true"},
            {"on": "stream.*", "run": f"cat > {out}; exit 3", "filter": {"client": "nobody"}},
        ]
    )
    r = mgmt.post("/api/v1/hooks/test", {"index": 1}, "json")
    assert r.status_code == 202, r.content
    body = r.json()
    assert body["queued"] == ["run"]
    # `stream.*` fires a real kind of that domain, marked as a test; the filter is ignored
    assert body["event"]["kind"] == "stream.started" and body["event"]["test"] is True
    [(name, args)] = sent
    assert name == "hooks.fire" and args[1] == "run"
    assert dispatch.in_flight(redis_db) == 1  # the permit is held until the firing ends
    services.fire(*args)  # what the hook worker does with the task
    assert dispatch.in_flight(redis_db) == 0
    assert '"test":true' in out.read_text()

    log = mgmt.get("/api/v1/hooks/deliveries").json()
    assert log[0]["exit_code"] == 3 and log[0]["outcome"] == "failed"
    assert log[0]["event_kind"] == "stream.started" and log[0]["event_seq"] is None
    assert log[0]["duration_ms"] >= 0 and log[0]["channel"] == "run"


def test_test_fire_refusals(bus, redis_db, sent, mgmt):
    _save([{"on": "library.changed", "run": "true"}])
    assert mgmt.post("/api/v1/hooks/test", {"index": 5}, "json").status_code == 404
    r = mgmt.post("/api/v1/hooks/test", {"index": "x"}, "json")
    assert r.status_code == 400 and r.json()["fields"][0]["field"] == "index"
    assert mgmt.post("/api/v1/hooks/test", [1], "json").status_code == 400
    hook_config.hooks_path().write_text("{not json")
    hook_config._cache.invalidate()
    r = mgmt.post("/api/v1/hooks/test", {"index": 0}, "json")
    assert r.status_code == 409 and "invalid" in r.json()["error"]
    assert sent == []


def test_test_fire_when_the_cap_is_full_is_503_with_retry_after(bus, redis_db, sent, mgmt):
    _save([{"on": "library.changed", "run": "true"}])
    held = [dispatch.acquire_permit(redis_db, 30) for _ in range(8)]
    assert all(held)
    r = mgmt.post("/api/v1/hooks/test", {"index": 0}, "json")
    assert r.status_code == 503 and r.headers["Retry-After"] == "5"
    assert sent == []


def test_delivery_log_shows_http_status_newest_first_and_checks_its_query(db, mgmt):
    Delivery.objects.create(channel="run", target="true", outcome="ok", exit_code=0)
    Delivery.objects.create(
        channel="webhook",
        target="https://hooks.example/x",
        outcome="failed",
        http_status=502,
        duration_ms=41,
        error="HTTP 502",
    )
    rows = mgmt.get("/api/v1/hooks/deliveries").json()
    assert [r["channel"] for r in rows] == ["webhook", "run"]
    assert (rows[0]["http_status"], rows[0]["duration_ms"]) == (502, 41)
    assert rows[0]["created"].endswith("Z")
    only = mgmt.get("/api/v1/hooks/deliveries?channel=run&limit=1").json()
    assert [r["exit_code"] for r in only] == [0]
    for query in ("limit=0", "limit=501", "limit=-1", "limit=x", "channel=nope"):
        assert mgmt.get(f"/api/v1/hooks/deliveries?{query}").status_code == 400, query
    assert APIClient().get("/api/v1/hooks/deliveries").status_code == 401


def test_test_fire_without_redis_is_503_not_500(bus, sent, mgmt, settings, tmp_path):
    _save([{"on": "library.changed", "run": "true"}])
    settings.REDIS_URL = f"unix://{tmp_path}/no-redis.sock"  # nothing listens there
    r = mgmt.post("/api/v1/hooks/test", {"index": 0}, "json")
    assert r.status_code == 503 and "Redis" in r.json()["error"]
    assert r.headers["Retry-After"] == "5" and sent == []
