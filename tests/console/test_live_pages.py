"""Now streaming, Displays and Pair a device in process: who gets in, headers, the nav entries
and the approval prompt's script, and the /pair form's answers (the browser tests drive the
same pages in Chromium)."""

from __future__ import annotations

import pytest
from django.test import Client

from access import credentials
from tests.console.test_pages import browser  # noqa: F401 - fixture

pytestmark = pytest.mark.django_db

PAGES = ["/streaming", "/displays", "/pair"]


def test_first_run_and_logged_out_visitors_are_sent_away():
    for path in PAGES:
        r = Client().get(path)
        assert r.status_code == 302 and r["Location"] == "/welcome", path
    credentials.set_credentials("admin", "s3cret")
    for path in PAGES:
        r = Client().get(path)
        assert r.status_code == 302 and r["Location"] == f"/login?next={path}"


def test_pages_render_in_the_console_layout_with_a_strict_policy(browser):  # noqa: F811
    for path in PAGES:
        r = browser.get(path)
        assert r.status_code == 200, path
        assert "script-src 'self'" in r["Content-Security-Policy"]
        assert r["Cache-Control"] == "no-store"
        body = r.content.decode()
        assert "<script>" not in body
        assert f'<a href="{path}" aria-current="page">' in body
        assert "/static/console/approvals.js" in body  # the prompt, on every console page
    dashboard = browser.get("/").content.decode()
    assert "/static/console/approvals.js" in dashboard
    assert '<a href="/streaming">Now streaming</a>' in dashboard


def test_the_pin_form_answers_in_place(browser):  # noqa: F811
    page = browser.get("/pair").content.decode()
    assert "No device is waiting" in page
    r = browser.post("/pair", {"pin": "12x4"})
    assert r.status_code == 400 and "must be 4 digits" in r.content.decode()
    r = browser.post("/pair", {"pin": "1234", "name": "tv"})
    assert r.status_code == 409 and "No device is waiting" in r.content.decode()
    assert 'aria-invalid="true"' in r.content.decode()


def test_the_pin_form_needs_the_csrf_token():
    credentials.set_credentials("admin", "s3cret")
    c = Client(enforce_csrf_checks=True)
    assert c.post("/login", {"username": "admin", "password": "s3cret"}).status_code == 403
    c = Client(enforce_csrf_checks=True)
    c.get("/login")
    token = c.cookies["csrftoken"].value
    r = c.post("/login", {"username": "admin", "password": "s3cret",
                          "csrfmiddlewaretoken": token})  # fmt: skip
    assert r.status_code == 302
    assert c.post("/pair", {"pin": "1234"}).status_code == 403
    token = c.cookies["csrftoken"].value
    r = c.post("/pair", {"pin": "1234", "csrfmiddlewaretoken": token})
    assert r.status_code == 409
