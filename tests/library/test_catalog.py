"""The compat app catalog (apps.json): ids, hand edits, the admin API, covers, browse, import."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import zlib
from pathlib import Path

import pytest
from django.core.management import call_command

from library import catalog
from tests.library import stores

pytestmark = [pytest.mark.django_db, pytest.mark.urls("tests.library.urls")]


def _crc(text: str) -> str:
    v = zlib.crc32(text.encode())
    return str(abs(v - 2**32 if v >= 2**31 else v))


def test_missing_file_gets_a_desktop_entry(state):
    apps = catalog.list_apps()
    assert [a.name for a in apps] == ["Desktop"]
    assert apps[0].id == _crc("Desktop")
    assert json.loads((state / "apps.json").read_text())["apps"][0]["name"] == "Desktop"


def test_ids_follow_crc32_of_name_plus_image_digest_and_dedupe_by_index(state, monkeypatch):
    png = stores.png_bytes()
    (state / "covers").mkdir()
    (state / "covers" / "a.png").write_bytes(png)
    monkeypatch.setenv("HOME_GAME", "Steam Big Picture")
    doc = {
        "env": {"GAME": "$(HOME_GAME)"},
        "apps": [
            {"name": "$(GAME)", "image-path": "a.png", "cmd": "run $(GAME) $$HOME"},
            {"name": "Twin"},
            {"name": "Twin"},
            {"name": "Broken image", "image-path": "missing.png"},
        ],
    }
    (state / "apps.json").write_text(json.dumps(doc))
    apps = catalog.list_apps()
    assert apps[0].name == "Steam Big Picture"
    assert apps[0].cmd == "run Steam Big Picture $HOME"
    assert apps[0].id == _crc("Steam Big Picture" + hashlib.sha256(png).hexdigest())
    assert apps[1].id == _crc("Twin") and apps[2].id == _crc("Twin2")
    assert apps[3].image_path is None and apps[3].id == _crc("Broken image")
    assert catalog.find_app(apps[0].id).name == "Steam Big Picture"
    assert catalog.cover_png(apps[0]) == png and catalog.cover_png(apps[1]) is None
    assert catalog.box_png().startswith(b"\x89PNG")


def test_hand_edit_is_picked_up_and_broken_file_is_reported_never_overwritten(state, admin):
    catalog.list_apps()
    path = state / "apps.json"
    path.write_text(json.dumps({"env": {}, "apps": [{"name": "Hand made", "cmd": "x"}]}))
    assert [a["name"] for a in admin.get("/api/apps").json()["apps"]] == ["Hand made"]
    path.write_text('{"apps": [ {"name": "oops" ')
    r = admin.get("/api/apps")
    assert r.status_code == 500 and "apps.json" in r.json()["error"]
    r = admin.post("/api/apps", {"index": -1, "name": "New"}, "json")
    assert r.status_code == 500
    assert admin.delete("/api/apps/0").status_code == 500
    assert path.read_text() == '{"apps": [ {"name": "oops" '
    assert catalog.list_apps() == []


def test_empty_file_lists_no_apps(state, admin):
    (state / "apps.json").write_text("")
    assert admin.get("/api/apps").json()["apps"] == []


def test_api_round_trip_create_update_delete_with_every_field(state, admin):
    (state / "covers").mkdir()
    (state / "covers" / "b.png").write_bytes(stores.png_bytes())
    body = {
        "index": -1,
        "name": "Game",
        "cmd": "/usr/bin/game",
        "working-dir": "/tmp",
        "output": "/tmp/out.log",
        "env": {"A": "1"},
        "auto-detach": False,
        "wait-all": "true",
        "exit-timeout": 9,
        "exclude-global-prep-cmd": True,
        "elevated": False,
        "prep-cmd": [{"do": "echo on", "undo": "echo off", "elevated": False}],
        "detached": ["/usr/bin/helper"],
        "image-path": "b.png",
        "encoder-preset": 2,
        "unknown-key": "dropped",
    }
    r = admin.post("/api/apps", body, "json")
    assert r.status_code == 200 and r.json()["status"] is True
    apps = admin.get("/api/apps").json()["apps"]
    game = next(a for a in apps if a["name"] == "Game")
    expected = {k: v for k, v in body.items() if k not in ("index", "unknown-key")}
    expected["wait-all"] = True
    assert game == expected
    app = next(a for a in catalog.list_apps() if a.name == "Game")
    assert app.encoder_preset == 2 and app.prep[0]["do"] == "echo on" and app.wait_all
    index = apps.index(game)
    r = admin.post("/api/apps", {"index": index, "name": "Game", "encoder-preset": 7}, "json")
    assert r.status_code == 200
    game = admin.get("/api/apps").json()["apps"][r.json()["index"]]
    assert game == {"name": "Game"}  # out-of-range preset silently ignored
    cover = admin.get(f"/api/covers/{index}")
    assert cover.status_code == 404
    assert admin.delete(f"/api/apps/{r.json()['index']}").status_code == 200
    assert [a["name"] for a in admin.get("/api/apps").json()["apps"]] == ["Desktop"]


@pytest.mark.parametrize(
    "body",
    [
        {"name": "no index"},
        {"index": "x", "name": "a"},
        {"index": -1, "name": ""},
        {"index": -1, "name": 5},
        {"index": -1, "name": "a", "prep-cmd": "echo"},
        {"index": -1, "name": "a", "env": []},
        {"index": -1, "name": "a", "image-path": "/etc/passwd"},
        {"index": -1, "name": "a", "image-path": "../../../../etc/x.png"},
        {"index": 99, "name": "a"},
        {"index": -1, "name": "a" * 1000},
    ],
)
def test_bad_apps_input_is_400(state, admin, body):
    before = catalog.api_document()
    r = admin.post("/api/apps", body, "json")
    assert r.status_code == 400 and r.json()["status"] is False
    assert catalog.api_document() == before


def test_delete_index_is_digits_only(state, admin):
    assert admin.delete("/api/apps/-1").status_code == 404
    assert admin.delete("/api/apps/..%2Fx").status_code == 404
    assert admin.delete("/api/apps/5").status_code == 400


def test_scopes_and_csrf(state, admin, client):
    assert client.get("/api/apps").status_code == 401
    r = admin.post(
        "/api/apps", {"index": -1, "name": "x"}, "json", HTTP_ORIGIN="https://evil.example"
    )
    assert r.status_code == 403
    assert [a["name"] for a in catalog.api_document()["apps"]] == ["Desktop"]


def test_cover_upload_data_saves_png_and_serves_it(state, admin):
    data = base64.b64encode(stores.jpeg_bytes()).decode()
    r = admin.post("/api/covers/upload", {"key": "igdb_1", "data": data}, "json")
    assert r.status_code == 200
    path = r.json()["path"]
    assert path == str(state / "covers" / "igdb_1.png")
    assert Path(path).read_bytes().startswith(b"\x89PNG")
    admin.post("/api/apps", {"index": 0, "name": "Desktop", "image-path": path}, "json")
    cover = admin.get("/api/covers/0")
    assert cover.status_code == 200 and cover["Content-Type"] == "image/png"
    assert cover.content == Path(path).read_bytes()


def test_cover_upload_from_the_allowed_host_only(state, admin, cdn, monkeypatch):
    monkeypatch.setenv("HOST_COVER_URL_PREFIX", cdn.url + "/")
    cdn.files["/igdb/cover.jpg"] = stores.jpeg_bytes()
    r = admin.post("/api/covers/upload", {"key": "k", "url": cdn.url + "/igdb/cover.jpg"}, "json")
    assert r.status_code == 200
    other = "http://localhost:1/igdb/cover.jpg"
    r = admin.post("/api/covers/upload", {"key": "k2", "url": other}, "json")
    assert r.status_code == 400
    sneaky = cdn.url.replace("http://", "http://x@") + "/igdb/cover.jpg"
    assert admin.post("/api/covers/upload", {"key": "k3", "url": sneaky}, "json").status_code == 400


@pytest.mark.parametrize(
    "key",
    ["../escape", "a/../../b", "x\x00y", "/etc/passwd", "..", "", "k" * 500, None, 5],
)
def test_hostile_cover_keys_are_400_and_nothing_is_written(state, admin, key):
    data = base64.b64encode(stores.png_bytes()).decode()
    r = admin.post("/api/covers/upload", {"key": key, "data": data}, "json")
    assert r.status_code == 400
    assert _files_outside(state) == []
    assert not (state / "covers").exists() or not any((state / "covers").iterdir())


def test_encoded_slash_key_stays_inside_the_covers_dir(state, admin):
    data = base64.b64encode(stores.png_bytes()).decode()
    r = admin.post("/api/covers/upload", {"key": "a/b%2F..%2Fc", "data": data}, "json")
    assert r.status_code == 200
    written = os.path.realpath(r.json()["path"])
    assert os.path.dirname(written) == str(state / "covers")


def test_a_png_that_is_really_a_zip_is_400(state, admin):
    data = base64.b64encode(stores.zip_named_png()).decode()
    r = admin.post("/api/covers/upload", {"key": "evil.png", "data": data}, "json")
    assert r.status_code == 400 and "not an image" in r.json()["error"]
    r = admin.post("/api/covers/upload", {"key": "x", "data": "%%%not base64"}, "json")
    assert r.status_code == 400


def test_browse(tmp_path, admin):
    (tmp_path / "dir").mkdir()
    (tmp_path / "run.sh").write_text("#!/bin/sh\n")
    os.chmod(tmp_path / "run.sh", 0o755)
    (tmp_path / "notes.txt").write_text("x")
    (tmp_path / b"bad\xffname".decode("utf-8", "surrogateescape")).write_text("x")
    r = admin.get("/api/browse", {"path": str(tmp_path), "type": "executable"})
    assert [e["name"] for e in r.json()["entries"]] == ["dir", "run.sh"]
    r = admin.get("/api/browse", {"path": str(tmp_path), "type": "directory"})
    assert [e["name"] for e in r.json()["entries"]] == ["dir"]
    r = admin.get("/api/browse", {"path": str(tmp_path)})
    assert r.status_code == 200 and len(r.json()["entries"]) == 4
    assert admin.get("/api/browse").json()["path"] == "/"
    assert admin.get("/api/browse", {"path": str(tmp_path / "run.sh")}).json()["path"] == str(
        tmp_path
    )
    for bad in ({"path": "/no/such/dir"}, {"path": "rel"}, {"path": "/", "type": "zip"}):
        r = admin.get("/api/browse", bad)
        assert r.status_code == 400 and r.json()["error"]
    locked = tmp_path / "locked"
    locked.mkdir(mode=0o000)
    if os.geteuid() != 0:
        assert admin.get("/api/browse", {"path": str(locked)}).status_code == 400


def test_games_scan_lists_three_launchers(fixture_stores, admin):
    games = admin.get("/api/games/scan").json()
    assert {g["launcher"] for g in games} == {"steam", "heroic", "lutris"}
    dota = next(g for g in games if g["name"] == "Dota 2")
    assert dota["path"].endswith("steamapps/common/Dota 2")


def test_import_sunshine_apps_and_covers(state, tmp_path):
    src = tmp_path / "sunshine"
    (src / "covers").mkdir(parents=True)
    (src / "covers" / "igdb_5.png").write_bytes(stores.png_bytes())
    (src / "covers" / "fake.png").write_bytes(stores.zip_named_png())
    (src / "apps.json").write_text(
        json.dumps(
            {
                "env": {"PATH": "$(PATH):$(HOME)/.local/bin"},
                "apps": [
                    {"name": "Desktop", "image-path": "desktop.png"},
                    {
                        "name": "Steam Big Picture",
                        "cmd": "steam steam://open/bigpicture",
                        "auto-detach": "true",
                        "wait-all": "true",
                        "exit-timeout": "5",
                        "image-path": "covers/igdb_5.png",
                        "prep-cmd": [{"do": "a", "undo": "b", "elevated": "false"}],
                    },
                    {"name": "Fake", "image-path": "covers/fake.png"},
                    "garbage",
                ],
            }
        )
    )
    call_command("import_sunshine_apps", str(src / "apps.json"))
    apps = {a.name: a for a in catalog.list_apps()}
    assert set(apps) == {"Desktop", "Steam Big Picture", "Fake"}
    big = apps["Steam Big Picture"]
    assert big.image_path and big.image_path.startswith(str(state / "covers"))
    assert catalog.cover_png(big) is not None
    assert big.exit_timeout == 5 and big.prep[0]["elevated"] is False
    assert apps["Fake"].image_path is None


def test_import_sunshine_apps_turns_elevated_off_with_one_warning_per_app(state, tmp_path):
    from io import StringIO

    from games.appfields import ELEVATED_REASON

    src = tmp_path / "apps.json"
    src.write_text(
        json.dumps(
            {
                "apps": [
                    {"name": "Admin Tool", "cmd": "tool", "elevated": "true"},
                    {
                        "name": "Prepped",
                        "elevated": True,
                        "prep-cmd": [
                            {"do": "a", "undo": "b", "elevated": "true"},
                            {"do": "c", "elevated": True},
                        ],
                    },
                    {"name": "Plain", "elevated": False},
                ]
            }
        )
    )
    err = StringIO()
    call_command("import_sunshine_apps", str(src), stderr=err)
    apps = {a.name: a for a in catalog.list_apps()}
    assert {"Admin Tool", "Prepped", "Plain"} <= set(apps)  # none skipped
    assert not any(a.elevated for a in apps.values())
    assert all(p["elevated"] is False for p in apps["Prepped"].prep)
    assert apps["Admin Tool"].cmd == "tool" and len(apps["Prepped"].prep) == 2
    lines = err.getvalue().strip().splitlines()
    assert len(lines) == 2, lines  # one per elevated app, none for Plain
    for line, name in zip(lines, ("Admin Tool", "Prepped"), strict=True):
        assert repr(name) in line and "elevated off" in line and ELEVATED_REASON in line
    raw = json.loads((state / "apps.json").read_text())
    assert "true" not in json.dumps([a.get("elevated") for a in raw["apps"]]).lower()


def _files_outside(state):
    """Files written anywhere but the state dir during a test: none may exist."""
    root = state.parent
    return [p for p in root.rglob("*") if p.is_file() and state not in p.parents]


def test_catalog_changes_emit_and_hand_edits_are_noticed_once(state, admin, events):
    assert catalog.hand_edited() is False  # first look: baseline only
    with events.during():
        r = admin.post("/api/apps", {"index": -1, "name": "Emitted"}, "json")
        assert r.status_code == 200
        assert admin.delete(f"/api/apps/{r.json()['index']}").status_code == 200
    assert events.seen == [("library.changed", {"source": "manual"})] * 2
    assert catalog.hand_edited() is False  # our own writes are not hand edits
    doc = json.loads((state / "apps.json").read_text())
    doc["apps"].append({"name": "By hand"})
    (state / "apps.json").write_text(json.dumps(doc))
    assert catalog.hand_edited() is True
    assert catalog.hand_edited() is False
