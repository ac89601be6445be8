"""The first-run welcome page: a plain form, CSRF-protected, gone once credentials exist."""

from __future__ import annotations

import re

import pytest
from django.test import Client

from hostmgmt.auth import credentials

pytestmark = pytest.mark.django_db


def _form(client):
    page = client.get("/welcome")
    assert page.status_code == 200
    token = re.search(rb'name="csrfmiddlewaretoken" value="([^"]+)"', page.content).group(1)
    return token.decode()


def test_home_sends_a_new_host_to_welcome():
    r = Client().get("/")
    assert r.status_code == 302 and r["Location"] == "/welcome"


def test_welcome_sets_credentials_and_logs_in():
    c = Client(enforce_csrf_checks=True)
    token = _form(c)
    r = c.post(
        "/welcome",
        {"username": "op", "password": "pw", "confirm": "pw", "csrfmiddlewaretoken": token},
        secure=True,
        HTTP_REFERER="https://testserver/welcome",
    )
    assert r.status_code == 302 and r["Location"] == "/"
    assert credentials.verify("op", "pw") is not None
    assert c.get("/welcome").status_code == 302  # the page is gone once credentials exist
    assert c.get("/", secure=True).status_code == 200


def test_mismatched_passwords_show_an_error_and_store_nothing():
    c = Client(enforce_csrf_checks=True)
    token = _form(c)
    r = c.post(
        "/welcome",
        {"username": "op", "password": "a", "confirm": "b", "csrfmiddlewaretoken": token},
        secure=True,
        HTTP_REFERER="https://testserver/welcome",
    )
    assert r.status_code == 400
    assert b"do not match" in r.content
    assert not credentials.credentials_exist()


def test_post_without_csrf_token_is_refused():
    r = Client(enforce_csrf_checks=True).post(
        "/welcome", {"username": "op", "password": "a", "confirm": "a"}, secure=True
    )
    assert r.status_code == 403
    assert not credentials.credentials_exist()
