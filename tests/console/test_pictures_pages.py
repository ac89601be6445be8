"""The pictures' assets on the console pages, in process: the stylesheet on every page, the
script on the two pages with live sessions, the dashboard's column for them. What they draw:
tests/console/test_pictures_e2e.py."""

from __future__ import annotations

import re

import pytest

from tests.console.test_pages import browser  # noqa: F401 - fixture
from tests.support.livehost import ROOT

pytestmark = pytest.mark.django_db

STATIC = ROOT / "static" / "console"


def test_the_pictures_stylesheet_is_on_every_page_and_the_script_where_sessions_are(browser):  # noqa: F811
    for path in ("/", "/streaming", "/apps", "/library"):
        body = browser.get(path).content.decode()
        assert '<link rel="stylesheet" href="/static/console/pictures.css">' in body, path
        has_script = '<script src="/static/console/pictures.js" defer></script>' in body
        assert has_script == (path in ("/", "/streaming")), path
    dashboard = browser.get("/").content.decode()
    assert "<th>Screen · last minute</th><th></th></tr>" in dashboard


def test_the_pictures_stylesheet_falls_back_where_no_theme_defines_a_colour():
    css = (STATIC / "pictures.css").read_text()
    uses = re.findall(r"var\(--[a-z0-9-]+(,[^)]*)?\)", css)
    assert uses and all(fallback for fallback in uses), uses


def test_the_assets_are_served(browser):  # noqa: F811
    for name in ("pictures.js", "pictures.css"):
        r = browser.get(f"/static/console/{name}")
        assert r.status_code == 200, name
        assert b"".join(r.streaming_content) == (STATIC / name).read_bytes()
