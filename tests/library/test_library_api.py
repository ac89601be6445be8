"""The unified library through the management API, in process: listing, custom, provider, art."""

from __future__ import annotations

import pytest

from library import services
from library.models import CustomEntry
from tests.library import stores

pytestmark = [pytest.mark.django_db, pytest.mark.urls("tests.library.urls")]


def _titles(resp):
    return [e["title"] for e in resp.json()]


def test_listing_merges_stores_and_custom_sorted_case_insensitively(fixture_stores, mgmt, events):
    with events.during():
        services.rescan_all()
        r = mgmt.post("/api/v1/library/custom", {"title": "bastion", "platform": "PC"}, "json")
    assert r.status_code == 201
    listing = mgmt.get("/api/v1/library").json()
    titles = [e["title"] for e in listing]
    assert titles == sorted(titles, key=str.lower)
    assert {"Dota 2", "stardew Valley", "Fortnite", "Diablo II", "bastion"} <= set(titles)
    assert "Proton Experimental" not in titles
    dota = next(e for e in listing if e["id"] == "steam:570")
    assert dota["platform"] == "PC" and dota["store"] == "steam"
    assert all("detect" not in e and "prep" not in e for e in listing)
    sources = [p["source"] for k, p in events.seen if k == "library.changed"]
    assert {"steam", "heroic", "lutris", "manual"} <= set(sources)


def test_platform_filter_is_case_insensitive_and_provider_filter_exact(
    fixture_stores, mgmt, events
):
    with events.during():
        services.rescan_all()
        mgmt.post("/api/v1/library/custom", {"title": "Zelda", "platform": "Switch"}, "json")
        mgmt.put(
            "/api/v1/library/provider/romm",
            [{"external_id": "1", "title": "Mario", "platform": "SNES"}],
            "json",
        )
    assert _titles(mgmt.get("/api/v1/library?platform=switch")) == ["Zelda"]
    assert "Dota 2" in _titles(mgmt.get("/api/v1/library?platform=pc"))
    assert _titles(mgmt.get("/api/v1/library?provider=romm")) == ["Mario"]
    assert _titles(mgmt.get("/api/v1/library?provider=ROMM")) == []


def test_custom_entry_round_trip_with_prep_and_detect(mgmt, events):
    body = {
        "title": "Emulated Thing",
        "platform": "SNES",
        "art": {"portrait": "https://img.example/p.jpg"},
        "launch": {"kind": "command", "value": "/usr/bin/snes9x game.sfc"},
        "prep": [{"do": "xrandr --output X", "undo": "xrandr --auto"}, {"do": "echo hi"}],
        "detect": {"exe": "/usr/bin/snes9x", "process_name": ""},
        "genres": ["platformer"],
    }
    with events.during():
        created = mgmt.post("/api/v1/library/custom", body, "json")
    assert created.status_code == 201
    cid = created.json()["id"]
    assert len(cid) == 12 and int(cid, 16) >= 0
    assert "prep" not in created.json() and "detect" not in created.json()
    one = mgmt.get(f"/api/v1/library/custom/{cid}").json()
    assert one["prep"] == body["prep"]
    assert one["detect"] == {"exe": "/usr/bin/snes9x"}
    listed = next(e for e in mgmt.get("/api/v1/library").json() if e["id"] == f"custom:{cid}")
    assert "prep" not in listed and "detect" not in listed and listed["genres"] == ["platformer"]
    with events.during():
        r = mgmt.put(f"/api/v1/library/custom/{cid}", {"title": "Renamed"}, "json")
    assert r.status_code == 200 and r.json() == {"id": cid, "title": "Renamed", "art": {}}
    with events.during():
        assert mgmt.delete(f"/api/v1/library/custom/{cid}").status_code == 204
    assert mgmt.get(f"/api/v1/library/custom/{cid}").status_code == 404
    assert [p for k, p in events.seen] == [{"source": "manual"}] * 3


@pytest.mark.parametrize(
    "body",
    [
        {"title": ""},
        {"title": "   "},
        {},
        {"title": "x" * 5000},
        {"title": "ok", "prep": [{"undo": "no do"}]},
        {"title": "ok", "art": {"portrait": "file:///etc/passwd"}},
        {"title": "ok", "launch": {"kind": "rm", "value": "x"}},
        ["not", "an", "object"],
    ],
)
def test_bad_custom_input_is_400_and_writes_nothing(mgmt, body):
    r = mgmt.post("/api/v1/library/custom", body, "json")
    assert r.status_code == 400
    assert "error" in r.json()
    assert CustomEntry.objects.count() == 0


def test_empty_title_names_the_field(mgmt):
    r = mgmt.post("/api/v1/library/custom", {"title": ""}, "json")
    assert r.json()["fields"][0]["field"] == "title"


@pytest.mark.parametrize(
    "bad_id", ["..", "..%2F..%2Fetc", "ABCDEF012345", "0123456789ab0", "%00", "custom:0123"]
)
def test_unknown_or_hostile_custom_ids_are_404(mgmt, bad_id):
    assert mgmt.get(f"/api/v1/library/custom/{bad_id}").status_code == 404
    assert mgmt.delete(f"/api/v1/library/custom/{bad_id}").status_code == 404


def test_provider_reconcile_keeps_ids_drops_orphans_and_blocks_manual_edits(mgmt, events):
    with events.during():
        first = mgmt.put(
            "/api/v1/library/provider/romm",
            [{"external_id": "a", "title": "A"}, {"external_id": "b", "title": "B"}],
            "json",
        ).json()
    ids = {e["external_id"]: e["id"] for e in first}
    with events.during():
        second = mgmt.put(
            "/api/v1/library/provider/romm",
            [{"external_id": "b", "title": "B2"}, {"external_id": "c", "title": "C"}],
            "json",
        ).json()
    assert [e["title"] for e in second] == ["B2", "C"]
    assert second[0]["id"] == ids["b"] and second[0]["provider"] == "romm"
    assert not CustomEntry.objects.filter(pk=ids["a"]).exists()
    for method in ("get", "put", "delete"):
        r = getattr(mgmt, method)(f"/api/v1/library/custom/{ids['b']}", {"title": "x"}, "json")
        assert r.status_code == 409, method
    with events.during():
        assert mgmt.delete("/api/v1/library/provider/romm").json() == {"removed": 2}
    assert [p["source"] for _k, p in events.seen] == ["romm", "romm", "romm"]


@pytest.mark.parametrize(
    "provider,body",
    [
        ("manual", []),
        ("Bad_Upper", []),
        ("ok", [{"external_id": "a", "title": "A"}, {"external_id": "a", "title": "B"}]),
        ("ok", [{"external_id": "", "title": "A"}]),
        ("ok", [{"external_id": "a", "title": ""}]),
        ("ok", {"external_id": "a", "title": "A"}),
    ],
)
def test_provider_bad_input_is_400_and_transactional(mgmt, provider, body):
    r = mgmt.put(f"/api/v1/library/provider/{provider}", body, "json")
    assert r.status_code == 400, r.content
    assert CustomEntry.objects.count() == 0


def test_scanner_toggle_hides_a_store_and_emits(fixture_stores, mgmt, events):
    with events.during():
        services.rescan_all()
        r = mgmt.put("/api/v1/library/scanners/lutris", {"enabled": False}, "json")
    lutris = next(s for s in r.json() if s["id"] == "lutris")
    assert (lutris["label"], lutris["enabled"], lutris["state"]) == ("Lutris", False, "done")
    assert lutris["count"] == 0  # a disabled store lists nothing
    assert not any(e["store"] == "lutris" for e in mgmt.get("/api/v1/library").json())
    assert events.seen[-1] == ("library.changed", {"source": "lutris"})
    assert mgmt.put("/api/v1/library/scanners/nope", {"enabled": False}, "json").status_code == 404


def test_rescan_emits_only_on_change(fixture_stores, events):
    with events.during():
        services.rescan("steam")
        services.rescan("steam")
    assert events.seen == [("library.changed", {"source": "steam"})]
    stores.write_manifest(fixture_stores.second, 10, "Counter-Strike")
    with events.during():
        services.rescan("steam")
    assert len(events.seen) == 2
    assert services.launch_info("steam:10")["launch"] == {"kind": "steam_appid", "value": "10"}


def test_library_needs_the_token(client):
    assert client.get("/api/v1/library").status_code == 401
    assert client.get("/api/v1/library/art/steam:570/portrait").status_code == 401


def test_cached_listing_follows_every_kind_of_change(fixture_stores, events):
    with events.during():
        services.rescan_all()
        before = {e["id"] for e in services.list_library()}
        made = services.create_custom({"title": "Fresh"})
        assert f"custom:{made['id']}" in {e["id"] for e in services.list_library()}
        services.delete_custom(made["id"])
        assert {e["id"] for e in services.list_library()} == before
        stores.write_manifest(fixture_stores.steam, 20, "Team Fortress")
        services.rescan("steam")
        assert "steam:20" in {e["id"] for e in services.list_library()}
        services.reconcile("romm", [{"external_id": "1", "title": "Prov"}])
        assert "Prov" in {e["title"] for e in services.list_library()}


def test_rescan_progress_per_store_queued_scanning_done_failed(fixture_stores, mgmt, monkeypatch):
    """The console's progress: POST /library/scan marks every store queued; each store's own
    scan moves it to done with its count; a scanner that raises is `failed` with the reason."""
    from library.scanners import SCANNERS

    services.rescan_all()
    before = {s["id"]: s for s in mgmt.get("/api/v1/library/scanners").json()}
    assert before["steam"]["state"] == "done" and before["steam"]["count"] > 0
    r = mgmt.post("/api/v1/library/scan")
    assert r.status_code == 202 and r.json()["queued"] is True
    # no broker in this process: the scan ran inline, so every store is done again
    after = {s["id"]: s for s in mgmt.get("/api/v1/library/scanners").json()}
    assert {s["state"] for s in after.values()} == {"done"}
    assert after["steam"]["scanned_at"] >= r.json()["requested_at"]

    services.request_rescan()
    assert {s["state"] for s in services.list_scanners()} == {"queued"}

    def broken():
        raise OSError("store file unreadable")

    monkeypatch.setattr(SCANNERS["heroic"], "scan", broken)
    services.rescan_all()
    states = {s["id"]: s for s in services.list_scanners()}
    assert states["heroic"]["state"] == "failed"
    assert "store file unreadable" in states["heroic"]["error"]
    assert states["steam"]["state"] == "done"
