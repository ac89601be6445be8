"""Auth attacks an outsider would send, against real hosts: a cross-site page posting to a
tokenless host, racing first-run requests, and password guessing spread over the Django admin
login and HTTP Basic.
"""

from __future__ import annotations

import random
import re
import threading
import time

import httpx
import pytest

from access import throttle
from tests.conftest import ADMIN_PASSWORD, ADMIN_USER
from tests.support.livehost import running_host

pytestmark = pytest.mark.e2e

STRONG = "violet kestrel 42"


@pytest.fixture(scope="module")
def tokenless_host():
    """A new host (no admin yet) started with --no-mgmt-token."""
    with running_host(args=["--no-mgmt-token"]) as host:
        yield host


def test_first_run_takes_one_admin_even_when_requests_race(tokenless_host):
    host = tokenless_host
    with host.client() as c:
        weak = {"newUsername": "op", "newPassword": "12345678", "confirmNewPassword": "12345678"}
        r = c.post("/api/password", json=weak)
        assert r.status_code == 400
        assert r.json()["error"].startswith("newPassword: ") and "common" in r.json()["error"]

    racers = 6
    barrier = threading.Barrier(racers)
    answers: dict[int, int] = {}

    def race(i: int) -> None:
        pw = f"{STRONG} {i}"
        body = {"newUsername": f"racer{i}", "newPassword": pw, "confirmNewPassword": pw}
        with host.client() as c:
            c.get("/api/health")  # connect first so the posts leave together
            barrier.wait()
            answers[i] = c.post("/api/password", json=body).status_code

    threads = [threading.Thread(target=race, args=(i,)) for i in range(racers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    winners = [i for i, code in answers.items() if code == 200]
    assert len(winners) == 1, answers
    assert sorted(answers.values()) == [200] + [401] * (racers - 1), answers
    (w,) = winners
    with host.client() as c:
        assert c.get("/api/csrf-token", auth=(f"racer{w}", f"{STRONG} {w}")).status_code == 200
        loser = next(i for i in answers if i != w)
        assert (
            c.get("/api/csrf-token", auth=(f"racer{loser}", f"{STRONG} {loser}")).status_code == 401
        )


@pytest.mark.parametrize(
    "path",
    ["/api/v1/host/shutdown", "/api/v1/native/pending/1/approve", "/api/v1/host/restart"],
)
@pytest.mark.parametrize(
    "headers",
    [
        # an HTML form on another site, as a modern browser sends it
        {
            "Content-Type": "application/x-www-form-urlencoded",
            "Origin": "https://evil.example",
            "Sec-Fetch-Site": "cross-site",
        },
        # fetch(..., {mode: "no-cors", body: "..."}) from another site
        {"Content-Type": "text/plain;charset=UTF-8", "Origin": "https://evil.example"},
        # a sandboxed iframe's form
        {"Content-Type": "multipart/form-data; boundary=x", "Origin": "null"},
        # a simple request from a client that names no origin at all
        {"Content-Type": "text/plain"},
    ],
)
def test_tokenless_host_refuses_cross_site_simple_writes(tokenless_host, path, headers):
    with tokenless_host.client() as c:
        body = b"a=1"
        if headers["Content-Type"].startswith("multipart/"):
            body = b'--x\r\nContent-Disposition: form-data; name="a"\r\n\r\n1\r\n--x--\r\n'
        r = c.post(path, content=body, headers=headers)
        assert r.status_code == 403, r.text
        assert set(r.json()) == {"error"}
        assert c.get("/api/v1/health").status_code == 200
    assert tokenless_host.proc.poll() is None  # neither shut down nor restarting


def test_tokenless_host_takes_same_origin_and_json_writes(tokenless_host):
    own = tokenless_host.url
    with tokenless_host.client() as c:
        # a script: JSON body, no browser headers
        assert c.post("/api/v1/game/end", json={}).status_code == 409
        # the host's own page
        r = c.post(
            "/api/v1/game/end",
            json={},
            headers={"Origin": own, "Sec-Fetch-Site": "same-origin"},
        )
        assert r.status_code == 409
        # a custom header, which a cross-site page cannot send without a CORS preflight
        r = c.post("/api/v1/game/end", content=b"{}", headers={"X-Requested-With": "curl"})
        assert r.status_code in (409, 415)
        # JSON does not excuse a foreign origin
        r = c.post("/api/v1/game/end", json={}, headers={"Origin": "https://evil.example"})
        assert r.status_code == 403


def _from(host, address: str) -> httpx.Client:
    """A client whose connections leave from `address`: a login bucket of its own."""
    transport = httpx.HTTPTransport(verify=host.ssl_context(), local_address=address)
    return httpx.Client(base_url=host.url, transport=transport, timeout=30)


def _admin_login(c: httpx.Client, host, password: str) -> httpx.Response:
    page = c.get("/admin/login/")
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.text).group(1)
    return c.post(
        "/admin/login/",
        data={
            "username": ADMIN_USER,
            "password": password,
            "csrfmiddlewaretoken": token,
            "next": "/admin/",
        },
        headers={"Origin": host.url, "Referer": f"{host.url}/admin/login/"},
    )


def _logged_in(c: httpx.Client) -> bool:
    return "sessionid" in c.cookies


def test_admin_login_and_basic_share_one_bucket_that_only_a_password_clears(live_host):
    """Password guesses spread over /admin/login/ and Basic hit the limit together, and a
    working scoped token in between does not reset the count."""
    address = (
        f"127.{random.randrange(1, 250)}.{random.randrange(1, 250)}.{random.randrange(2, 250)}"
    )
    with live_host.client(auth=(ADMIN_USER, ADMIN_PASSWORD)) as admin:
        minted = admin.post("/api/tokens", json={"name": "e2e-bucket", "scopes": ["logs:get"]})
        assert minted.status_code == 200, minted.text
        token = minted.json()["token"]
    try:
        with _from(live_host, address) as c:
            started = time.monotonic()
            for i in range(throttle.MAX_FAILURES - 1):
                if i % 2:
                    r = _admin_login(c, live_host, f"guess-{i}")
                    assert r.status_code == 200 and not _logged_in(c), r.status_code
                else:
                    r = c.get("/api/csrf-token", auth=(ADMIN_USER, f"guess-{i}"))
                    assert r.status_code == 401
            r = c.get("/api/csrf-token", headers={"Authorization": f"Bearer {token}"})
            assert r.status_code == 200  # a token success ...
            r = _admin_login(c, live_host, "one-more-guess")  # ... did not reset the count
            assert r.status_code == 200 and not _logged_in(c)
            assert time.monotonic() - started < throttle.WINDOW_S, "too slow to test the window"
            r = c.get("/api/csrf-token", auth=(ADMIN_USER, ADMIN_PASSWORD))
            assert r.status_code == 429 and r.json()["status_code"] == 429
            r = _admin_login(c, live_host, ADMIN_PASSWORD)
            assert r.status_code == 429 and r.headers["Retry-After"]
            assert not _logged_in(c)
        with live_host.client(auth=(ADMIN_USER, ADMIN_PASSWORD)) as other:
            assert other.get("/api/csrf-token").status_code == 200  # other addresses unaffected
    finally:
        with live_host.client(auth=(ADMIN_USER, ADMIN_PASSWORD)) as admin:
            admin.delete("/api/tokens/e2e-bucket")
