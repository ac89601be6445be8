"""The console's Store page in process: behind the login, in the nav, under the strict policy."""

from __future__ import annotations

import pytest
from django.test import Client

from access import credentials

pytestmark = pytest.mark.django_db


def test_store_page_needs_the_login_and_is_in_the_nav(redis_db):
    credentials.set_credentials("admin", "s3cret")
    r = Client().get("/store")
    assert r.status_code == 302 and r["Location"] == "/login?next=/store"
    c = Client()
    assert c.post("/login", {"username": "admin", "password": "s3cret"}).status_code == 302
    r = c.get("/store")
    assert r.status_code == 200 and b'href="/store"' in r.content
    assert b'aria-current="page">Store' in r.content
    assert b"<script>" not in r.content and "script-src 'self'" in r["Content-Security-Policy"]
    assert b"console/store.js" in r.content
