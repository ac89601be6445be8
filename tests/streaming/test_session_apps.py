"""The one app resolver both planes launch through (`streaming.sessions.apps`): Desktop, a
catalog entry (the browser's `app:<id>`, Moonlight's bare id) and a library title."""

from __future__ import annotations

import pytest

from library import catalog
from library import services as library
from streaming.sessions import apps

ENTRY = catalog.App(id="3", index=0, name="Probe", cmd=" run-probe ", exit_timeout=0,
                    prep=[{"do": "x"}], encoder_preset=2,
                    raw={"name": "Probe", "encoder-preset": 2})  # fmt: skip


@pytest.fixture(autouse=True)
def sources(monkeypatch):
    monkeypatch.setattr(catalog, "find_app", lambda app_id: ENTRY if app_id == "3" else None)
    steam = {"title": "Dota", "store": "steam", "prep": [],
             "launch": {"kind": "steam_appid", "value": "570"}, "detect": {}}  # fmt: skip
    monkeypatch.setattr(library, "launch_info", lambda key: steam if key == "steam:570" else None)


def test_desktop_is_the_default():
    for key in ("desktop", "", None):
        choice = apps.resolve(key)
        assert choice.key == "desktop" and choice.title == "Desktop" and not choice.cmd


def test_the_browser_key_of_a_catalog_entry():
    choice = apps.resolve("app:3")
    assert (choice.key, choice.title, choice.cmd) == ("app:3", "Probe", "run-probe")
    app = apps.app_of(choice)
    assert app.id == "app:3" and app.exit_timeout == 0.0 and app.encoder_preset == 2


def test_moonlight_launches_the_same_entry_by_its_bare_id():
    app = apps.catalog_app(3)
    assert app.id == "3" and app.name == "Probe" and app.cmd == "run-probe"
    assert app.prep == [{"do": "x"}] and app.encoder_preset == 2
    assert apps.catalog_app("4") is None


def test_a_library_title():
    choice = apps.resolve("steam:570")
    assert choice.title == "Dota" and choice.cmd == "steam steam://rungameid/570"
    assert choice.raw["store"] == "steam"


def test_unknown_keys_name_nothing():
    assert apps.resolve("app:4") is None and apps.resolve("steam:1") is None
