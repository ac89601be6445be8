"""Display policy, layout and custom presets through the management API, in-process."""

from __future__ import annotations

import json

import pytest

pytestmark = pytest.mark.django_db


def test_default_policy_and_every_preset_expansion(v1):
    body = v1.get("/api/v1/display/settings").json()
    assert body["configured"] is False
    assert body["settings"]["keep_alive"] == {"mode": "duration", "seconds": 10}
    assert [p["id"] for p in body["presets"]] == [
        "default",
        "gaming-rig",
        "shared-desktop",
        "hotdesk",
        "workstation",
    ]
    rigs = {p["id"]: p["fields"] for p in body["presets"]}
    assert rigs["gaming-rig"]["keep_alive"] == {"mode": "forever"}
    assert rigs["hotdesk"]["identity"] == "per-client-mode"
    assert rigs["workstation"]["layout"]["mode"] == "manual"
    assert "keep_alive" in body["enforced"] and body["custom_presets"] == []


def test_put_settings_forever_is_honoured_and_persisted(v1, state):
    r = v1.put(
        "/api/v1/display/settings",
        {"preset": "custom", "keep_alive": {"mode": "forever"}, "max_displays": 2},
        format="json",
    )
    assert r.status_code == 200, r.content
    assert r.json()["effective"]["keep_alive"] == {"mode": "forever"}
    assert r.json()["configured"] is True
    stored = json.loads((state / "display-settings.json").read_text())
    assert stored["keep_alive"] == {"mode": "forever"} and stored["max_displays"] == 2
    r = v1.put("/api/v1/display/settings", {"preset": "hotdesk"}, format="json")
    assert r.json()["effective"]["mode_conflict"] == "reject"


@pytest.mark.parametrize(
    "body,field",
    [
        ({"version": 2}, "version"),
        ({"preset": "lan-party"}, "preset"),
        ({"keep_alive": {"mode": "duration", "seconds": 5}}, "keep_alive.seconds"),
        ({"keep_alive": {"mode": "duration", "seconds": "60"}}, "keep_alive.seconds"),
        ({"keep_alive": {"mode": "sometimes"}}, "keep_alive.mode"),
        ({"keep_alive": "forever"}, "keep_alive"),
        ({"max_displays": 17}, "max_displays"),
        ({"max_displays": True}, "max_displays"),
        ({"topology": "mirror"}, "topology"),
        ({"layout": {"mode": "grid"}}, "layout.mode"),
        (
            {"layout": {"mode": "manual", "positions": {"a": {"x": 0, "y": 0}}}},
            "layout.positions.a",
        ),
        (
            {"layout": {"mode": "manual", "positions": {"0": {"x": 1.5, "y": 0}}}},
            "layout.positions.0",
        ),
        ({"capture_monitor": {"name": "x"}}, "capture_monitor"),
        ({"surprise": 1}, "surprise"),
    ],
)
def test_put_settings_rejects_malformed_policy(v1, state, body, field):
    r = v1.put("/api/v1/display/settings", body, format="json")
    assert r.status_code == 400, r.content
    assert r.json()["error"] == "invalid display policy"
    assert field in [f["field"] for f in r.json()["fields"]]
    assert not (state / "display-settings.json").exists()


def test_layout_sets_manual_and_keeps_other_axes_explicit(v1):
    v1.put(
        "/api/v1/display/settings",
        {"preset": "hotdesk", "capture_monitor": " DP-1 "},
        format="json",
    )
    r = v1.put(
        "/api/v1/display/layout",
        {"positions": {"0": {"x": 0, "y": 0}, "1": {"x": -1920, "y": 0}}},
        format="json",
    )
    assert r.status_code == 200, r.content
    s = r.json()["settings"]
    assert s["preset"] == "custom" and s["layout"]["mode"] == "manual"
    assert s["layout"]["positions"]["1"] == {"x": -1920, "y": 0}
    assert s["keep_alive"] == {"mode": "duration", "seconds": 300}
    assert s["mode_conflict"] == "reject" and s["capture_monitor"] == "DP-1"
    bad = v1.put("/api/v1/display/layout", {"positions": {"0": {"x": "1"}}}, format="json")
    assert bad.status_code == 400


def test_presets_crud_with_stable_ids(v1):
    r = v1.post(
        "/api/v1/display/presets",
        {
            "name": "couch",
            "fields": {"keep_alive": {"mode": "forever"}, "game_session": "auto"},
        },
        format="json",
    )
    assert r.status_code == 201, r.content
    preset = r.json()
    assert len(preset["id"]) == 12 and preset["name"] == "couch"
    assert preset["fields"]["keep_alive"] == {"mode": "forever"}
    assert preset["fields"]["game_session"] == "auto"
    # Apply it: a custom policy carrying its fields.
    applied = v1.put(
        "/api/v1/display/settings", {"preset": "custom", "fields": preset["fields"]}, format="json"
    )
    assert applied.status_code == 200, applied.content
    r = v1.put(f"/api/v1/display/presets/{preset['id']}", {"name": "sofa"}, format="json")
    assert r.status_code == 200 and r.json()["id"] == preset["id"] and r.json()["name"] == "sofa"
    assert [p["name"] for p in v1.get("/api/v1/display/presets").json()] == ["sofa"]
    assert v1.delete(f"/api/v1/display/presets/{preset['id']}").status_code == 204
    assert v1.get("/api/v1/display/presets").json() == []
    # Deleting never touches the active policy.
    settings = v1.get("/api/v1/display/settings").json()["settings"]
    assert settings["keep_alive"] == {"mode": "forever"} and settings["game_session"] == "auto"


def test_preset_bad_input(v1):
    r = v1.post("/api/v1/display/presets", {"name": "  "}, format="json")
    assert r.status_code == 400 and r.json()["error"] == "empty preset name"
    assert (
        v1.post("/api/v1/display/presets", {"name": "x", "fields": []}, format="json").status_code
        == 400
    )
    assert (
        v1.post(
            "/api/v1/display/presets", {"name": "x", "fields": {"max_displays": 99}}, format="json"
        ).status_code
        == 400
    )
    assert (
        v1.put("/api/v1/display/presets/000000000000", {"name": "x"}, format="json").status_code
        == 404
    )
    assert v1.delete("/api/v1/display/presets/nope").status_code == 404
    assert (
        v1.post("/api/v1/display/presets", "[]", content_type="application/json").status_code == 400
    )


def test_unwritable_state_dir_gives_500_and_keeps_the_policy(v1, state, read_only_dir):
    v1.put("/api/v1/display/settings", {"keep_alive": {"mode": "off"}}, format="json")
    before = (state / "display-settings.json").read_text()
    read_only_dir(state)
    r = v1.put("/api/v1/display/settings", {"keep_alive": {"mode": "forever"}}, format="json")
    assert r.status_code == 500 and r.json()["error"]
    assert v1.put("/api/v1/display/layout", {"positions": {}}, format="json").status_code == 500
    assert (state / "display-settings.json").read_text() == before
