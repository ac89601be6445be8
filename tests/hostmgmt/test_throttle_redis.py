"""The failed-login buckets live in the host's Redis: every process and every restart shares them.

A second process here is a real one: a Python subprocess on the same state directory and Redis,
sending requests through the host's own URL map (Django's test client), as a second daphne or a
restarted host would.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from django.test import Client

from access import identity, throttle
from tests.conftest import basic

pytestmark = pytest.mark.django_db

REPO = Path(__file__).resolve().parents[2]
IP = "127.0.0.1"  # the test client's REMOTE_ADDR
JUNK_TOKEN = "Bearer " + "0" * 64

_OTHER = """
import json, os, sys
import django
django.setup()
from django.test import Client
from django.test.utils import setup_test_environment
from access import throttle
setup_test_environment()
failures, header = int(sys.argv[1]), sys.argv[2]
codes = [Client().get("/api/config", HTTP_AUTHORIZATION=header).status_code
         for _ in range(failures)]
print(json.dumps({"codes": codes, "blocked_for": throttle.blocked_for("127.0.0.1")}))
"""


def other_process(redis_url: str, failures: int = 0, header: str = JUNK_TOKEN) -> dict:
    """Run `failures` bad logins in a separate host process; what it saw and its verdict."""
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "tests.settings",
        "REDIS_URL": redis_url,
        "HOST_STATE_DIR": os.environ["HOST_STATE_DIR"],
    }
    done = subprocess.run(
        [sys.executable, "-c", _OTHER, str(failures), header],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_failures_in_one_process_block_the_address_in_another_and_after_a_restart(
    redis_db, redis_url, admin_headers
):
    seen = other_process(redis_url, throttle.MAX_FAILURES)
    assert seen["codes"] == [401] * throttle.MAX_FAILURES
    assert 0 < seen["blocked_for"] <= throttle.WINDOW_S

    # this process never saw a failure, and still refuses even the right password
    r = Client().get("/api/config", **admin_headers)
    assert r.status_code == 429, r.content
    assert 0 < int(r["Retry-After"]) <= throttle.WINDOW_S + 1
    # a third process, started after the one that failed has gone (a restarted host)
    again = other_process(redis_url)
    assert again["blocked_for"] > 0


def test_only_a_password_clears_the_bucket_for_every_process(redis_db, redis_url, admin_headers):
    seen = other_process(redis_url, throttle.MAX_FAILURES - 1)
    assert seen["codes"] == [401] * (throttle.MAX_FAILURES - 1) and seen["blocked_for"] == 0
    assert Client().get("/api/config", **admin_headers).status_code == 200
    # cleared: the other process may fail nine more times without being blocked
    assert other_process(redis_url, throttle.MAX_FAILURES - 1)["blocked_for"] == 0
    # a wrong password never clears it: one more failure anywhere blocks
    wrong = {"HTTP_AUTHORIZATION": basic("admin", "wrong")}
    assert Client().get("/api/config", **wrong).status_code == 401
    assert Client().get("/api/config", **admin_headers).status_code == 429


def test_the_key_is_the_address_under_the_host_id_and_holds_no_secret(redis_db, admin_headers):
    secret = "hunter2-do-not-store"
    Client().get("/api/config", HTTP_AUTHORIZATION=basic("admin", secret))
    keys = [k.decode() for k in redis_db.keys("*")]
    assert keys == [f"hostmgmt:{identity.unique_id()}:login-failures:{IP}"]
    members = redis_db.zrange(keys[0], 0, -1)
    assert len(members) == 1 and secret.encode() not in b"".join(members)
    assert 0 < redis_db.pttl(keys[0]) <= throttle.WINDOW_S * 1000


def test_concurrent_failures_are_all_counted(redis_db):
    threads = [
        threading.Thread(target=lambda: [throttle.record_failure(IP) for _ in range(2)])
        for _ in range(4)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert throttle.blocked_for(IP) == 0  # 8 of 10
    throttle.record_failure(IP)
    throttle.record_failure(IP)
    assert throttle.blocked_for(IP) > 0


def test_unreachable_redis_refuses_logins_with_the_reason(redis_db, admin_headers, settings):
    settings.REDIS_URL = "unix:///nonexistent/redis.sock"
    r = Client().get("/api/config", **admin_headers)
    assert r.status_code == 503, r.content
    assert "Redis is unreachable" in r.json()["error"] and r["Retry-After"]
    with pytest.raises(throttle.ThrottleUnavailable):
        throttle.record_failure(IP)


@pytest.mark.parametrize("path", ["/login", "/admin/login/"])
def test_unreachable_redis_refuses_the_login_pages_with_the_reason(redis_db, admin_headers,
                                                                  settings, path):  # fmt: skip
    settings.REDIS_URL = "unix:///nonexistent/redis.sock"
    r = Client().post(path, {"username": "admin", "password": "s3cret"})
    assert r.status_code == 503, r.content[:300]
    assert b"Redis is unreachable" in r.content and r["Retry-After"]
    assert "sessionid" not in r.cookies


def test_unreachable_redis_refuses_the_pin_page_login(redis_db, admin_headers, settings):
    settings.REDIS_URL = "unix:///nonexistent/redis.sock"
    r = Client().get("/pin", **admin_headers)
    assert r.status_code in (401, 302), r.status_code
