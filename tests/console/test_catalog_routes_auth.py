"""The library and hooks routes the console pages call take the operator's login session
(`ConsoleMgmtAPIView`) with Django's CSRF check on writes; the bearer token keeps working."""

from __future__ import annotations

import json

import pytest
from django.contrib.auth import get_user_model
from django.test import Client

from access import tokens
from hooks import hook_config

pytestmark = pytest.mark.django_db

TOKEN = "ef" * 32
CSRF = "k" * 32  # Django accepts the unmasked secret as the header token


@pytest.fixture(autouse=True)
def host_token(monkeypatch, tmp_path):
    monkeypatch.setenv("HOST_STATE_DIR", str(tmp_path))
    monkeypatch.setenv("HOST_MGMT_TOKEN", TOKEN)
    tokens._cache.clear()
    hook_config._cache.invalidate()
    yield
    tokens._cache.clear()
    hook_config._cache.invalidate()


@pytest.fixture
def operator():
    user = get_user_model().objects.create_superuser("op", password="x")
    c = Client(enforce_csrf_checks=True)
    c.force_login(user)
    c.cookies["csrftoken"] = CSRF
    return c


DOC = {"hooks": [{"on": "library.changed", "run": "true"}]}


@pytest.mark.parametrize(
    "path",
    ["/api/v1/hooks", "/api/v1/hooks/deliveries", "/api/v1/library", "/api/v1/library/scanners"],
)
def test_the_session_reads_and_nobody_else_does(operator, path):
    r = operator.get(path)
    assert r.status_code == 200, r.content
    assert r["Cache-Control"] == "no-store"
    assert Client().get(path).status_code == 401
    assert Client().get(path, HTTP_AUTHORIZATION=f"Bearer {TOKEN}").status_code == 200


def test_art_images_load_with_the_session(operator):
    # a non-Steam id has no art: the 404 says the session got past authentication
    assert operator.get("/api/v1/library/art/lutris:1/portrait").status_code == 404
    assert Client().get("/api/v1/library/art/lutris:1/portrait").status_code == 401


def test_session_writes_need_the_csrf_token(operator):
    body = json.dumps(DOC)
    r = operator.put("/api/v1/hooks", body, content_type="application/json")
    assert r.status_code == 403 and r.json()["error"].startswith("CSRF check failed")
    assert not hook_config.hooks_path().exists()
    r = operator.put("/api/v1/hooks", body, content_type="application/json", HTTP_X_CSRFTOKEN=CSRF)
    assert r.status_code == 200 and json.loads(hook_config.hooks_path().read_text()) == DOC

    entry = json.dumps({"title": "Zelda"})
    r = operator.post("/api/v1/library/custom", entry, content_type="application/json")
    assert r.status_code == 403
    r = operator.post(
        "/api/v1/library/custom", entry, content_type="application/json", HTTP_X_CSRFTOKEN=CSRF
    )
    assert r.status_code == 201 and r.json()["title"] == "Zelda"
    r = operator.post("/api/v1/hooks/test", json.dumps({"index": 0}), "application/json")
    assert r.status_code == 403
