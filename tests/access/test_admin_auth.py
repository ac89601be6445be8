"""Admin API (/api) authentication, scopes, CSRF and login throttling, in process."""

from __future__ import annotations

import hashlib
import time
from unittest import mock

import pytest
import redis
from django.test import Client

from access import api_tokens, credentials, throttle
from tests.conftest import basic

pytestmark = pytest.mark.django_db

GOOD = "violet kestrel 42"


def test_unauthenticated_gets_401_with_basic_challenge(admin_user):
    r = Client().get("/api/csrf-token")
    assert r.status_code == 401
    assert r["WWW-Authenticate"].startswith('Basic realm="')
    assert r.json() == {"status": False, "status_code": 401, "error": r.json()["error"]}


def test_basic_admin_passes(admin_user):
    r = Client().get("/api/csrf-token", HTTP_AUTHORIZATION=basic(*admin_user))
    assert r.status_code == 200
    assert len(r.json()["csrf_token"]) >= 43  # 32 random bytes, URL-safe base64


@pytest.mark.parametrize(
    "auth",
    [
        basic("admin", "wrong"),
        basic("Admin", "s3cret"),
        "Basic !!!notbase64",
        "Basic " + "YWRtaW4=",  # no colon
        "Bearer " + "0" * 64,
        "Bearer short",
        "Digest abc",
    ],
)
def test_bad_credentials_are_401(admin_user, auth):
    r = Client().get("/api/csrf-token", HTTP_AUTHORIZATION=auth)
    assert r.status_code == 401
    assert r.json()["status"] is False


def test_ten_failures_in_window_give_429_and_success_resets(admin_user):
    c = Client()
    for _ in range(throttle.MAX_FAILURES):
        assert c.get("/api/csrf-token", HTTP_AUTHORIZATION=basic("admin", "x")).status_code == 401
    blocked = c.get("/api/csrf-token", HTTP_AUTHORIZATION=basic(*admin_user))
    assert blocked.status_code == 429
    assert blocked.json()["status_code"] == 429
    throttle.reset()
    for _ in range(throttle.MAX_FAILURES - 1):
        c.get("/api/csrf-token", HTTP_AUTHORIZATION=basic("admin", "x"))
    assert c.get("/api/csrf-token", HTTP_AUTHORIZATION=basic(*admin_user)).status_code == 200
    # the success emptied the bucket: nine more failures still do not block
    for _ in range(throttle.MAX_FAILURES - 1):
        c.get("/api/csrf-token", HTTP_AUTHORIZATION=basic("admin", "x"))
    assert c.get("/api/csrf-token", HTTP_AUTHORIZATION=basic(*admin_user)).status_code == 200


def test_scoped_token_stored_hashed_and_scope_checked(admin_user):
    plaintext = api_tokens.mint("reader", ["config:get"])
    stored = api_tokens.load()[0]
    assert plaintext not in api_tokens.store.config_path().read_text()
    assert stored.hash == api_tokens.hash_token(plaintext, stored.salt)
    c = Client()
    auth = {"HTTP_AUTHORIZATION": f"Bearer {plaintext}"}
    # any authenticated caller may mint a CSRF token
    assert c.get("/api/csrf-token", **auth).status_code == 200
    # admin-only route: a token without `*` is 403, not 401
    r = c.post("/api/password", data={}, content_type="application/json", **auth)
    assert r.status_code == 403
    admin_token = api_tokens.mint("root", ["*"])
    r = c.post(
        "/api/password",
        data={"currentUsername": "admin", "currentPassword": "s3cret", "newPassword": ""},
        content_type="application/json",
        HTTP_AUTHORIZATION=f"Bearer {admin_token}",
    )
    assert r.status_code == 400  # passed auth and scope, failed validation


def test_revoked_token_stops_on_next_request(admin_user):
    plaintext = api_tokens.mint("temp", ["logs:get"])
    c = Client()
    assert c.get("/api/csrf-token", HTTP_AUTHORIZATION=f"Bearer {plaintext}").status_code == 200
    assert api_tokens.revoke("temp")
    assert c.get("/api/csrf-token", HTTP_AUTHORIZATION=f"Bearer {plaintext}").status_code == 401


@pytest.mark.parametrize(
    "name, scopes",
    [
        ("", ["config:get"]),
        ("has space", ["config:get"]),
        ("ci\n", ["config:get"]),
        ("ok", ["stream:control"]),
        ("ok", []),
    ],
)
def test_mint_rejects_bad_requests(name, scopes):
    with pytest.raises(api_tokens.TokenRequestError):
        api_tokens.mint(name, scopes)


def test_duplicate_token_name_is_refused():
    api_tokens.mint("dup", ["config:get"])
    with pytest.raises(api_tokens.TokenRequestError):
        api_tokens.mint("dup", ["config:get"])


class TestCsrf:
    body = {"currentUsername": "admin", "currentPassword": "s3cret", "newPassword": ""}

    def post(self, admin_user, **headers):
        return Client().post(
            "/api/password",
            data=self.body,
            content_type="application/json",
            HTTP_AUTHORIZATION=basic(*admin_user),
            **headers,
        )

    def test_callers_without_origin_or_referer_are_exempt(self, admin_user):
        assert self.post(admin_user).status_code == 400  # reached validation

    def test_foreign_origin_without_token_is_403(self, admin_user):
        r = self.post(admin_user, HTTP_ORIGIN="https://evil.example")
        assert r.status_code == 403
        assert "CSRF" in r.json()["error"]

    def test_foreign_referer_without_token_is_403(self, admin_user):
        r = self.post(admin_user, HTTP_REFERER="https://evil.example/page")
        assert r.status_code == 403

    def test_localhost_origin_is_allowed(self, admin_user):
        assert self.post(admin_user, HTTP_ORIGIN="https://localhost").status_code == 400

    def test_minted_token_lets_a_foreign_origin_through(self, admin_user):
        token = (
            Client()
            .get("/api/csrf-token", HTTP_AUTHORIZATION=basic(*admin_user))
            .json()["csrf_token"]
        )
        r = self.post(admin_user, HTTP_ORIGIN="https://evil.example", HTTP_X_CSRF_TOKEN=token)
        assert r.status_code == 400
        wrong = self.post(admin_user, HTTP_ORIGIN="https://evil.example", HTTP_X_CSRF_TOKEN="x")
        assert wrong.status_code == 403

    def test_a_token_minted_by_one_web_process_passes_on_another(self, redis_db, redis_url):
        """The web processes share nothing but Redis and the database: the token is kept in
        Redis, so a fresh client (another process's) finds it; past its hour it is
        "expired", as it always was."""
        from access import csrf

        token = csrf.mint("client-a")
        other = redis.Redis.from_url(redis_url)
        digest = hashlib.sha256(b"client-a").hexdigest()
        assert any(token.encode() in other.get(k) for k in other.keys(f"*:csrf:{digest}"))

        class Req:
            headers = {"Origin": "https://evil.example", "X-CSRF-Token": token}
            GET = {}

            def get_host(self):
                return "127.0.0.1"

        assert csrf.check(Req(), "client-a") is None
        assert csrf.check(Req(), "client-b") == "invalid CSRF token"
        later = time.time() + csrf.TTL_S + 1
        with mock.patch.object(csrf.time, "time", return_value=later):
            assert csrf.check(Req(), "client-a") == "CSRF token expired"

    def test_configured_allowed_origin_passes(self, admin_user):
        from hostconfig import store

        store.write({"csrf_allowed_origins": "https://console.lan:8443"})
        assert self.post(admin_user, HTTP_ORIGIN="https://console.lan:8443").status_code == 400
        assert self.post(admin_user, HTTP_ORIGIN="https://console.lan").status_code == 403


class TestFirstRun:
    def test_password_route_is_open_until_credentials_exist(self):
        c = Client()
        body = {"newUsername": "op", "newPassword": GOOD, "confirmNewPassword": GOOD}
        r = c.post("/api/password", data=body, content_type="application/json")
        assert r.status_code == 200, r.content
        r = c.post("/api/password", data=body, content_type="application/json")
        assert r.status_code == 401

    def test_browsers_are_sent_to_welcome(self):
        r = Client().get("/api/csrf-token", HTTP_ACCEPT="text/html,application/xhtml+xml")
        assert r.status_code == 307
        assert r["Location"] == "/welcome"

    def test_scripts_get_401_on_first_run(self):
        assert Client().get("/api/csrf-token").status_code == 401

    def test_mismatched_confirmation_is_400(self):
        body = {"newUsername": "op", "newPassword": "a", "confirmNewPassword": "b"}
        r = Client().post("/api/password", data=body, content_type="application/json")
        assert r.status_code == 400
        assert r.json() == {"status": False, "status_code": 400, "error": "password mismatch"}


def test_json_responses_carry_security_headers(admin_user):
    r = Client().get("/api/health")
    assert r["Strict-Transport-Security"].startswith("max-age=")
    assert r["X-Frame-Options"] == "DENY"
    assert "frame-ancestors 'none'" in r["Content-Security-Policy"]


@pytest.mark.parametrize(
    "content_type, data",
    [
        ("application/json", "{not json"),
        ("text/plain", '{"newPassword": "x"}'),
        ("application/json", "[1, 2]"),
    ],
)
def test_malformed_bodies_are_400_envelopes(admin_user, content_type, data):
    r = Client().post(
        "/api/password",
        data=data,
        content_type=content_type,
        HTTP_AUTHORIZATION=basic(*admin_user),
    )
    assert r.status_code == 400
    body = r.json()
    assert body["status"] is False and body["status_code"] == 400 and body["error"]


def test_unknown_admin_route_is_404_envelope():
    r = Client().get("/api/nope")
    assert r.status_code == 404
    assert r.json() == {"status": False, "status_code": 404, "error": "not found"}


def test_origin_class_wan_is_refused_by_default():
    r = Client(REMOTE_ADDR="8.8.8.8").get("/api/health")
    assert r.status_code == 403
    assert Client(REMOTE_ADDR="192.168.1.20").get("/api/health").status_code == 200


def _set_password(auth=None, **fields):
    headers = {"HTTP_AUTHORIZATION": auth} if auth else {}
    return Client().post("/api/password", data=fields, content_type="application/json", **headers)


@pytest.mark.parametrize(
    "password, why",
    [("short7!", "too short"), ("password1", "too common"), ("qwertyuiop", "too common")],
)
def test_first_run_password_rules_name_the_field(password, why):
    r = _set_password(newUsername="op", newPassword=password, confirmNewPassword=password)
    assert r.status_code == 400
    body = r.json()
    assert body["status"] is False and body["status_code"] == 400
    assert body["error"].startswith("newPassword: ") and why in body["error"]
    assert not credentials.credentials_exist()


def test_password_change_applies_the_rules(admin_user):
    auth = basic(*admin_user)
    current = {"currentUsername": "admin", "currentPassword": "s3cret"}
    r = _set_password(auth, **current, newPassword="admin123", confirmNewPassword="admin123")
    assert r.status_code == 400 and r.json()["error"].startswith("newPassword: ")
    r = _set_password(auth, **current, newPassword=GOOD, confirmNewPassword=GOOD)
    assert r.status_code == 200, r.content
    assert credentials.verify("admin", GOOD) is not None


def test_a_late_first_run_request_cannot_replace_the_admin(monkeypatch):
    """The loser of a first-run race decided 'first run' before the winner committed."""
    body = {"newUsername": "first", "newPassword": GOOD, "confirmNewPassword": GOOD}
    real_exists = credentials.credentials_exist
    monkeypatch.setattr(credentials, "credentials_exist", lambda: False)  # the stale check
    assert _set_password(**body).status_code == 200
    late = {"newUsername": "second", "newPassword": GOOD + "!", "confirmNewPassword": GOOD + "!"}
    r = _set_password(**late)
    assert r.status_code == 401 and r["WWW-Authenticate"].startswith("Basic")
    assert r.json()["error"] == "admin credentials are already set; sign in to change them"
    monkeypatch.setattr(credentials, "credentials_exist", real_exists)
    assert credentials.verify("first", GOOD) is not None
    assert credentials.verify("second", GOOD + "!") is None


def test_token_success_does_not_reset_the_login_bucket(admin_user):
    token = api_tokens.mint("reader", ["config:get"])
    c = Client()
    for _ in range(throttle.MAX_FAILURES - 1):
        assert c.get("/api/csrf-token", HTTP_AUTHORIZATION=basic("admin", "x")).status_code == 401
    assert c.get("/api/csrf-token", HTTP_AUTHORIZATION=f"Bearer {token}").status_code == 200
    assert c.get("/api/csrf-token", HTTP_AUTHORIZATION=basic("admin", "x")).status_code == 401
    assert c.get("/api/csrf-token", HTTP_AUTHORIZATION=basic(*admin_user)).status_code == 429


def test_wrong_current_password_counts_as_a_failed_login(admin_user):
    c = Client()
    for _ in range(throttle.MAX_FAILURES - 1):
        assert c.get("/api/csrf-token", HTTP_AUTHORIZATION=basic("admin", "x")).status_code == 401
    # a `*` token holder guessing the password through the change route
    root = f"Bearer {api_tokens.mint('root', ['*'])}"
    wrong = {"currentUsername": "admin", "currentPassword": "guess"}
    r = _set_password(root, **wrong, newPassword=GOOD, confirmNewPassword=GOOD)
    assert r.status_code == 400
    r = _set_password(root, **wrong, newPassword=GOOD, confirmNewPassword=GOOD)
    assert r.status_code == 429
    assert c.get("/api/csrf-token", HTTP_AUTHORIZATION=basic(*admin_user)).status_code == 429


def _admin_login(c, password):
    return c.post("/admin/login/", {"username": "admin", "password": password, "next": "/admin/"})


def test_django_admin_login_shares_the_bucket(admin_user):
    c = Client()
    for i in range(throttle.MAX_FAILURES):
        if i % 2:
            r = _admin_login(c, f"guess{i}")
            assert r.status_code == 200 and "_auth_user_id" not in c.session
        else:
            assert (
                c.get("/api/csrf-token", HTTP_AUTHORIZATION=basic("admin", "x")).status_code == 401
            )
    assert c.get("/api/csrf-token", HTTP_AUTHORIZATION=basic(*admin_user)).status_code == 429
    r = _admin_login(c, admin_user[1])
    assert r.status_code == 429 and r["Retry-After"]
    assert "_auth_user_id" not in c.session


def test_django_admin_password_login_clears_the_bucket(admin_user):
    c = Client()
    for _ in range(throttle.MAX_FAILURES - 1):
        c.get("/api/csrf-token", HTTP_AUTHORIZATION=basic("admin", "x"))
    r = _admin_login(c, admin_user[1])
    assert r.status_code == 302 and c.session["_auth_user_id"]
    for _ in range(throttle.MAX_FAILURES - 1):
        c.get("/api/csrf-token", HTTP_AUTHORIZATION=basic("admin", "x"))
    assert c.get("/api/csrf-token", HTTP_AUTHORIZATION=basic(*admin_user)).status_code == 200


def test_blocked_address_cannot_log_in_through_django_authenticate(admin_user, rf):
    from django.contrib.auth import authenticate

    request = rf.post("/admin/login/")
    for _ in range(throttle.MAX_FAILURES):
        assert authenticate(request, username="admin", password="nope") is None
    assert authenticate(request, username="admin", password=admin_user[1]) is None


@pytest.mark.django_db(transaction=True)
def test_basic_reuses_the_admin_row_until_the_password_changes():
    """Outside a transaction (as daphne serves) Basic reads the admin user once per database
    change, not once per request; a password change takes effect on the very next request."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    credentials.set_credentials("admin", GOOD)
    c = Client()
    assert c.get("/api/csrf-token", HTTP_AUTHORIZATION=basic("admin", GOOD)).status_code == 200
    with CaptureQueriesContext(connection) as queries:
        r = c.get("/api/csrf-token", HTTP_AUTHORIZATION=basic("admin", GOOD))
    assert r.status_code == 200
    assert not [q for q in queries.captured_queries if "auth_user" in q["sql"]]
    credentials.set_credentials("admin", "amber falcon 77")
    assert c.get("/api/csrf-token", HTTP_AUTHORIZATION=basic("admin", GOOD)).status_code == 401
    r = c.get("/api/csrf-token", HTTP_AUTHORIZATION=basic("admin", "amber falcon 77"))
    assert r.status_code == 200


def test_concurrent_requests_with_one_header_run_one_password_check(admin_user, monkeypatch):
    """Eight requests carrying the same Basic header when it is not remembered (the first,
    or after it expired) wait for one PBKDF2 instead of each running their own; a header in
    steady use stays remembered past the TTL (each use extends it)."""
    import threading
    import time

    from django.contrib.auth.base_user import AbstractBaseUser

    credentials._cache.clear()
    calls = []
    original = AbstractBaseUser.check_password

    def slow_check(self, raw):
        calls.append(raw)
        time.sleep(0.2)  # PBKDF2 takes about a second here
        return original(self, raw)

    monkeypatch.setattr(AbstractBaseUser, "check_password", slow_check)
    user = credentials.admin_user()  # the threads must not query the test's transaction
    monkeypatch.setattr(credentials, "admin_user", lambda: user)
    barrier, results = threading.Barrier(8), []

    def request():
        barrier.wait()
        results.append(credentials.verify(*admin_user, shared=True) is not None)

    threads = [threading.Thread(target=request) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    assert results == [True] * 8 and len(calls) == 1, (results, len(calls))

    now = [time.monotonic()]
    monkeypatch.setattr(credentials, "_now", lambda: now[0])
    for _ in range(3):  # used every 200 s: never older than the TTL of 300 s
        now[0] += 200
        assert credentials.verify(*admin_user, shared=True) is not None
    assert len(calls) == 1
    now[0] += 301  # unused past the TTL: checked again
    assert credentials.verify(*admin_user, shared=True) is not None
    assert len(calls) == 2
    assert credentials.verify("admin", "wrong") is None and len(calls) == 3
