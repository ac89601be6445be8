"""Store scanners against fixture trees: Steam (two library folders), Heroic, Lutris."""

from __future__ import annotations

from library.scanners import heroic, lutris, steam
from tests.library import stores


def test_steam_reads_both_library_folders_and_drops_tools(fixture_stores):
    titles = {t.id: t for t in steam.scan()}
    assert set(titles) == {"steam:570", "steam:1091500", "steam:292030", "steam:413150"}
    witcher = titles["steam:292030"]
    assert witcher.title == "The Witcher 3: Wild Hunt"
    assert witcher.platform == "PC"
    assert witcher.install_dir.startswith(str(fixture_stores.second))
    assert witcher.art["portrait"] == "/api/v1/library/art/steam:292030/portrait"
    assert witcher.launch == {"kind": "steam_appid", "value": "292030"}


def test_steam_corrupt_and_non_utf8_manifests_are_skipped_not_fatal(fixture_stores, caplog):
    apps = fixture_stores.steam / "steamapps"
    (apps / "appmanifest_999.acf").write_text('"AppState" { "appid" ')
    (apps / "appmanifest_998.acf").write_bytes(
        b'"AppState"\n{\n"appid" "998"\n"name" "Caf\xe9 \xff Game"\n"installdir" "x"\n}\n'
    )
    (apps / "appmanifest_997.acf").write_text('"AppState" { "appid" "../../etc" "name" "x" }')
    titles = {t.id: t for t in steam.scan()}
    assert "steam:570" in titles and "steam:999" not in titles
    assert titles["steam:998"].title == "Caf\ufffd \ufffd Game"
    assert not any(".." in i for i in titles)
    assert "appmanifest_999.acf" in caplog.text


def test_missing_stores_are_empty(no_stores):
    assert steam.scan() == [] and heroic.scan() == [] and lutris.scan() == []


def test_heroic_installed_titles_with_http_art_only(fixture_stores):
    titles = {t.id: t for t in heroic.scan()}
    assert set(titles) == {
        "heroic:legendary:Fortnite",
        "heroic:legendary:Sugar",
        "heroic:gog:1207658924",
    }
    fortnite = titles["heroic:legendary:Fortnite"]
    assert fortnite.art == {"portrait": "https://cdn.example/Fortnite.jpg"}  # file:// dropped
    assert titles["heroic:gog:1207658924"].title == "The Witcher"


def test_heroic_broken_json_is_skipped(fixture_stores):
    (fixture_stores.base / "heroic/store_cache/legendary_library.json").write_text("{nope")
    ids = {t.id for t in heroic.scan()}
    assert ids == {"heroic:gog:1207658924"}


def test_lutris_installed_rows_only_and_corrupt_db_is_empty(fixture_stores):
    assert [(t.id, t.title) for t in lutris.scan()] == [("lutris:1", "Diablo II")]
    db = fixture_stores.base / "lutris" / "pga.db"
    db.write_bytes(b"this is not sqlite" * 100)
    assert lutris.scan() == []


def test_gigantic_titles_are_bounded(fixture_stores):
    stores.write_manifest(fixture_stores.steam, 42, "A" * 100_000, "big")
    big = next(t for t in steam.scan() if t.id == "steam:42")
    assert len(big.title) == 256


def test_signature_moves_when_a_manifest_is_added(fixture_stores):
    before = steam.signature()
    stores.write_manifest(fixture_stores.second, 10, "Counter-Strike")
    assert steam.signature() != before


def test_lutris_yaml_exe_becomes_a_detect_hint(fixture_stores):
    import sqlite3

    db = fixture_stores.base / "lutris" / "pga.db"
    con = sqlite3.connect(db)
    con.execute("ALTER TABLE games ADD COLUMN configpath TEXT")
    con.execute("UPDATE games SET configpath = 'diablo-ii-1' WHERE id = 1")
    con.execute("INSERT INTO games VALUES (3, 'Sneaky', 's', 'wine', '/g', 1, '../../etc/passwd')")
    con.commit()
    con.close()
    games = db.parent / "games"
    games.mkdir()
    (games / "diablo-ii-1.yml").write_text("game:\n  exe: /games/d2/Diablo II.exe\n")
    titles = {t.id: t for t in lutris.scan()}
    assert titles["lutris:1"].detect == {
        "install_dir": "/games/1",
        "exe": "/games/d2/Diablo II.exe",
    }
    assert titles["lutris:3"].detect == {"install_dir": "/g"}
    (games / "diablo-ii-1.yml").write_text("game: [unclosed")
    assert lutris.scan()[0].detect == {"install_dir": "/games/1"}
