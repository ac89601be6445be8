"""The first-run welcome page: a plain form, CSRF-protected, gone once credentials exist."""

from __future__ import annotations

import re

import pytest
from django.test import Client

from access import credentials

pytestmark = pytest.mark.django_db

GOOD = "violet kestrel 42"


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
        {"username": "op", "password": GOOD, "confirm": GOOD, "csrfmiddlewaretoken": token},
        secure=True,
        HTTP_REFERER="https://testserver/welcome",
    )
    assert r.status_code == 302 and r["Location"] == "/"
    assert credentials.verify("op", GOOD) is not None
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


def _submit(c, password, confirm=None, username="op"):
    return c.post(
        "/welcome",
        {
            "username": username,
            "password": password,
            "confirm": password if confirm is None else confirm,
            "csrfmiddlewaretoken": _form(c),
        },
        secure=True,
        HTTP_REFERER="https://testserver/welcome",
    )


@pytest.mark.parametrize(
    "username, password, why",
    [
        ("op", "pw", b"too short"),
        ("op", "Abc12!x", b"too short"),
        ("op", "password123", b"too common"),
        ("op", "iloveyou", b"too common"),
        ("operator", "Operator!9", b"too similar"),
    ],
)
def test_weak_passwords_are_refused_naming_the_field(username, password, why):
    c = Client(enforce_csrf_checks=True)
    r = _submit(c, password, username=username)
    assert r.status_code == 400
    assert b"Password:" in r.content and why in r.content
    assert not credentials.credentials_exist()


def test_a_second_submission_cannot_replace_the_first_admin():
    first, second = Client(enforce_csrf_checks=True), Client(enforce_csrf_checks=True)
    form = _form(second)  # both opened the page while the host was new
    assert _submit(first, GOOD).status_code == 302
    r = second.post(
        "/welcome",
        {"username": "intruder", "password": "another good one 7", "confirm": "another good one 7",
         "csrfmiddlewaretoken": form},
        secure=True,
        HTTP_REFERER="https://testserver/welcome",
    )  # fmt: skip
    assert r.status_code == 302 and r["Location"] == "/"
    assert credentials.verify("op", GOOD) is not None
    assert credentials.verify("intruder", "another good one 7") is None


def test_create_first_admin_never_replaces():
    credentials.create_first_admin("op", GOOD)
    with pytest.raises(credentials.AlreadySetUp):
        credentials.create_first_admin("intruder", "another good one 7")
    assert credentials.admin_user().get_username() == "op"
