"""Plugin registrations against a real Redis: validation, leases, lazy expiry and exactly the
documented `plugins.changed` events."""

from __future__ import annotations

import json
import threading

import pytest

from common.errors import Invalid
from plugins import registry
from tests.plugins.conftest import changed

SECRET = "s" * 16
GOOD = {"title": "Desktop folder", "version": "1.0", "ui": {"port": 8765, "secret": SECRET}}


@pytest.mark.parametrize(
    "body, field",
    [
        ({}, "title"),
        ({"title": "\x01\x02  "}, "title"),
        ({"title": "x" * 65}, "title"),
        ({"title": 5}, "title"),
        ({"title": "ok", "version": "v" * 33}, "version"),
        ({"title": "ok", "ui": {"port": 1023, "secret": SECRET}}, "ui.port"),
        ({"title": "ok", "ui": {"port": 65536, "secret": SECRET}}, "ui.port"),
        ({"title": "ok", "ui": {"port": True, "secret": SECRET}}, "ui.port"),
        ({"title": "ok", "ui": {"port": 2000, "secret": "short"}}, "ui.secret"),
        ({"title": "ok", "ui": {"port": 2000, "secret": "x" * 129}}, "ui.secret"),
        ({"title": "ok", "ui": {"port": 2000, "secret": "bad secret chars!"}}, "ui.secret"),
        ({"title": "ok", "ui": {"port": 2000, "secret": SECRET, "icon": "Bad"}}, "ui.icon"),
        ({"title": "ok", "ui": {"port": 2000, "secret": SECRET, "host": "0.0.0.0"}}, "ui.host"),
        ({"title": "ok", "extra": 1}, "extra"),
        ({"title": "ok", "ui": "nope"}, "ui"),
    ],
)
def test_bad_registrations_name_their_field(body, field):
    with pytest.raises(Invalid) as err:
        registry.validate(body)
    assert field in err.value.fields
    assert SECRET not in json.dumps(err.value.fields) + err.value.message


def test_cleaning_and_blank_version():
    rec = registry.validate({"title": " \x07Folder\x1f ", "version": "  "})
    assert rec == {"title": "Folder"}


@pytest.mark.parametrize("bad", ["", "A", "1abc", "a_b", "a" * 65, "a/b"])
def test_bad_ids_are_refused(bus, bad):
    with pytest.raises(Invalid):
        registry.register(bad, {"title": "x"})


def test_events_follow_the_lease_rules(bus, redis_db, monkeypatch):
    now = [1000.0]
    monkeypatch.setattr(registry.time, "time", lambda: now[0])
    registry.register("alpha", GOOD)  # first registration
    registry.register("alpha", GOOD)  # pure renewal: silent
    assert changed(bus) == ["alpha"]
    registry.register("alpha", {**GOOD, "ui": {"port": 8765, "secret": "t" * 16}})  # secret
    registry.register("alpha", {**GOOD, "version": "1.1"})  # version
    assert changed(bus) == ["alpha"] * 3
    now[0] += registry.LEASE_S - 1
    assert [s["id"] for s in registry.summaries()] == ["alpha"]
    now[0] += 2  # lease over: found by listing, announced once
    assert registry.summaries() == []
    assert registry.summaries() == []
    assert changed(bus) == ["alpha"] * 4
    registry.register("alpha", {**GOOD, "version": "1.1"})  # same body after expiry: announced
    assert changed(bus) == ["alpha"] * 5
    registry.unregister("alpha")  # delete of a live entry
    registry.unregister("alpha")  # idempotent, silent
    assert changed(bus) == ["alpha"] * 6


def test_concurrent_listers_announce_an_expiry_once(bus, monkeypatch):
    registry.register("beta", {"title": "B"})
    raw = json.loads(registry.redis_client.client().hget(registry.KEY, "beta"))
    raw["expires_at"] = 1.0
    registry.redis_client.client().hset(registry.KEY, "beta", json.dumps(raw))
    threads = [threading.Thread(target=registry.summaries) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert changed(bus) == ["beta", "beta"]  # registration + one expiry


def test_summaries_never_carry_the_secret_and_sort_by_title(bus):
    registry.register("zed", {"title": "Alpha", "ui": {"port": 2000, "secret": SECRET}})
    registry.register(
        "abc", {"title": "Beta", "ui": {"port": 2001, "secret": SECRET, "icon": "folder"}}
    )
    registry.register("aaa", {"title": "Alpha"})
    out = registry.summaries()
    assert [s["id"] for s in out] == ["aaa", "zed", "abc"]
    assert SECRET not in json.dumps(out)
    assert out[2]["ui"] == {"port": 2001, "icon": "folder"}
    assert registry.ui_credential("zed") == {"port": 2000, "secret": SECRET}
    with pytest.raises(registry.NotFound):
        registry.ui_credential("aaa")
    with pytest.raises(registry.NotFound):
        registry.ui_credential("nobody")
