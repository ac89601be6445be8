"""The plugin store in process: sources, signed catalogs from a real HTTPS server with a test
CA, install/uninstall jobs run through Celery's eager mode into a real plugin venv with pip,
and every refusal the issue names (real Redis for the lock and the bus)."""

from __future__ import annotations

import json
import time

import pytest
from django.test import Client

from plugins import env
from plugins.store import signing
from tests.plugins import store_support as ss
from tests.support.events import emitted

MGMT = "c" * 64
PLUGIN = "d" * 64


@pytest.fixture(scope="module")
def tls(tmp_path_factory):
    return ss.make_ca(tmp_path_factory.mktemp("store-ca"))


@pytest.fixture
def server(tls):
    srv = ss.FileServer(tls[1], tls[2])
    yield srv
    srv.close()


@pytest.fixture
def api(transactional_db, redis_db, tmp_path, monkeypatch, tls):
    from access import tokens
    from hostmgmt.celery import app

    monkeypatch.setenv("HOST_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.setenv("HOST_MGMT_TOKEN", MGMT)
    monkeypatch.setenv("HOST_PLUGIN_TOKEN", PLUGIN)
    monkeypatch.setenv("HOST_STORE_CA_FILE", str(tls[0]))
    # The built-in source at a loopback URL it may not use: it fails at once, no DNS.
    monkeypatch.setenv("HOST_STORE_BUILTIN_URL", "https://127.0.0.1:9/catalog.json")
    monkeypatch.setenv("HOST_STORE_HEALTH_S", "2")
    tokens._cache.clear()
    eager = app.conf.task_always_eager
    app.conf.task_always_eager = True
    client = Client(HTTP_AUTHORIZATION=f"Bearer {MGMT}")
    yield client
    app.conf.task_always_eager = eager
    tokens._cache.clear()


def _put(api, name, body):
    return api.put(f"/api/v1/store/sources/{name}", json.dumps(body), "application/json")


def _post(api, path, body):
    return api.post(f"/api/v1/store/{path}", json.dumps(body), "application/json")


def _publish(server, tmp_path, key, *, over=None, wheel=None):
    wheel = wheel or ss.build_plugin(tmp_path)
    server.files["/w/" + wheel.name] = wheel.read_bytes()
    body, sig = ss.signed_catalog([ss.entry(wheel, "w/" + wheel.name, **(over or {}))], key)
    server.files["/catalog.json"], server.files["/catalog.json.sig"] = body, sig
    return wheel


def _env_packages() -> set[str]:
    return {(p.pkg, p.version) for p in env.installed()}


def test_sources_rules(api):
    key = ss.public_key(signing.new_private_key())
    r = api.get("/api/v1/store/sources")
    assert r.status_code == 200 and r.json()[0]["builtin"] is True
    assert r.json()[0]["name"] == "hostmgmt" and r.json()[0]["stale"] is True
    assert _put(api, "hostmgmt", {"url": "https://a.example/c.json"}).status_code == 400
    assert api.delete("/api/v1/store/sources/hostmgmt").status_code == 403
    r = _put(api, "plain", {"url": "http://a.example/c.json"})
    assert r.status_code == 400 and "https" in r.content.decode()
    assert _put(api, "Bad_Name", {"url": "https://a.example/c.json"}).status_code == 400
    assert _put(api, "x", {"url": "https://a.example/" + "a" * 500}).status_code == 400
    assert _put(api, "x", {"url": "https://169.254.169.254/c.json"}).status_code == 400
    assert (
        _put(api, "x", {"url": "https://a.example/c", "public_key": "ed25519:AAAA"}).status_code
        == 400
    )
    assert (
        _put(api, "ok", {"url": "https://a.example/c.json", "public_key": key}).status_code == 204
    )
    assert _put(api, "unsigned", {"url": "https://b.example/c.json"}).status_code == 204
    rows = api.get("/api/v1/store/sources").json()
    assert [r["name"] for r in rows] == ["hostmgmt", "ok", "unsigned"]
    assert rows[1]["signed"] is True and rows[2]["signed"] is False
    assert len(emitted("store.changed")) == 2
    assert api.delete("/api/v1/store/sources/ok").status_code == 204
    assert api.delete("/api/v1/store/sources/ok").status_code == 204  # already absent
    plugin = Client(HTTP_AUTHORIZATION=f"Bearer {PLUGIN}")
    for path in ("catalog", "sources", "installed", "jobs"):
        assert plugin.get(f"/api/v1/store/{path}").status_code == 403
    assert plugin.post("/api/v1/store/refresh").status_code == 403


def test_catalog_verified_tampered_and_oversized(api, server, tmp_path):
    key = signing.new_private_key()
    _publish(server, tmp_path, key, over={"min_host": "v2099.1.0"})
    bad = ss.entry(ss.build_plugin(tmp_path, name="host-plugin-x"), "w/x.whl", pkg="Evil Pkg")
    doc = json.loads(server.files["/catalog.json"])
    doc["plugins"].append(bad)
    body = json.dumps(doc).encode()
    server.files["/catalog.json"], server.files["/catalog.json.sig"] = body, signing.sign(key, body)
    assert _put(api, "local", {"url": server.base + "/catalog.json",
                               "public_key": ss.public_key(key)}).status_code == 204  # fmt: skip
    cat = api.get("/api/v1/store/catalog").json()
    assert cat["host"]["platform"] == "linux" and cat["busy"] is False
    assert [(p["id"], p["tier"], p["compatible"]) for p in cat["plugins"]] == [
        ("hello", "external", False)
    ]
    local = next(s for s in cat["sources"] if s["name"] == "local")
    assert local["entry_count"] == 1 and "1 entries out of shape" in local["error"]
    assert not local["stale"]
    # Refused: an incompatible entry and one out of shape.
    assert _post(api, "install", {"source": "local", "id": "hello"}).status_code == 400
    assert _post(api, "install", {"source": "local", "id": "x"}).status_code == 400
    # Tampered: one byte of the catalog changed, its signature kept.
    server.files["/catalog.json"] = body.replace(b"tests", b"tEsts")
    r = api.post("/api/v1/store/refresh")
    local = next(s for s in r.json()["sources"] if s["name"] == "local")
    assert "signature does not verify" in local["error"] and local["entry_count"] == 0
    assert r.json()["plugins"] == []
    assert emitted("store.changed")
    # Oversized: refused before it is read in full; nothing of it is offered.
    server.files["/catalog.json"] = b" " * (1024 * 1024 + 1)
    local = next(s for s in api.post("/api/v1/store/refresh").json()["sources"]
                 if s["name"] == "local")  # fmt: skip
    assert "larger than" in local["error"] and local["entry_count"] == 0


@pytest.mark.timeout(240)
def test_install_jobs_refusals_and_uninstall(api, server, tmp_path, monkeypatch):
    key = signing.new_private_key()
    wheel = _publish(server, tmp_path, key)
    url = server.base + "/catalog.json"
    assert _put(api, "local", {"url": url, "public_key": ss.public_key(key)}).status_code == 204
    env.ensure_env()
    before = _env_packages()

    # The wheel served differs from the catalog's hash: a failed job, nothing installed.
    server.files["/w/" + wheel.name] = wheel.read_bytes() + b"x"
    r = _post(api, "install", {"source": "local", "id": "hello"})
    assert r.status_code == 202
    job = api.get(f"/api/v1/store/jobs/{r.json()['job']}").json()
    assert job["state"] == "failed" and "differs from the catalog" in job["error"]
    assert job["phase"] == "verifying" and _env_packages() == before
    server.files["/w/" + wheel.name] = wheel.read_bytes()

    # A job holds the lock: a second one is refused with 409.
    from plugins.store import jobs

    assert jobs.acquire("job-1-999")
    r = _post(api, "install", {"source": "local", "id": "hello"})
    assert r.status_code == 409 and "one at a time" in r.json()["error"]
    assert api.get("/api/v1/store/catalog").json()["busy"] is True
    jobs.release("job-1-999")

    # The real install.
    r = _post(api, "install", {"source": "local", "id": "hello"})
    job = api.get(f"/api/v1/store/jobs/{r.json()['job']}").json()
    assert job["state"] == "done", job
    assert job["phase"] == "done" and any("sha256" in line for line in job["log"])
    assert ("host-plugin-hello", "1.0.0") in _env_packages()
    rows = api.get("/api/v1/store/installed").json()
    assert rows == [{"pkg": "host-plugin-hello", "tier": "external", "running": False,
                     "version": "1.0.0", "plugin_id": "hello", "source": "local",
                     "entry_id": "hello", "title": "Host-Plugin-Hello",
                     "installed_at": rows[0]["installed_at"]}]  # fmt: skip
    assert len(emitted("store.changed")) >= 3  # source, the failed job, this job

    # Uninstall: a name out of shape, and a package that is not installed: 400.
    assert _post(api, "uninstall", {"pkg": "pip"}).status_code == 400
    assert _post(api, "uninstall", {"pkg": "host-plugin-nope"}).status_code == 400
    r = _post(api, "uninstall", {"pkg": "host-plugin-hello"})
    job = api.get(f"/api/v1/store/jobs/{r.json()['job']}").json()
    assert job["state"] == "done", job
    assert _env_packages() == before and api.get("/api/v1/store/installed").json() == []
    listed = api.get("/api/v1/store/jobs").json()
    assert [j["kind"] for j in listed] == ["install", "install", "uninstall"]
    assert api.get("/api/v1/store/jobs/job-1-1").status_code == 404


def test_install_request_shapes(api, server, tmp_path):
    key = signing.new_private_key()
    _publish(server, tmp_path, key)
    assert _put(api, "open", {"url": server.base + "/catalog.json"}).status_code == 204
    for body in ({}, {"id": "hello"}, {"spec": "https://a.example/x.whl"},
                 {"source": "open", "id": "hello", "spec": "x"}, {"source": 1, "id": "hello"},
                 {"spec": "https://a.example/host_plugin_a-1-py3-none-any.whl",
                  "accept_unverified": True}):  # fmt: skip
        assert _post(api, "install", body).status_code == 400, body
    # An unsigned source needs the operator's explicit acknowledgement.
    r = _post(api, "install", {"source": "open", "id": "hello"})
    assert r.status_code == 400 and "accept_unverified" in r.json()["error"]
    cat = api.get("/api/v1/store/catalog").json()
    assert cat["plugins"][0]["tier"] == "unverified" and cat["plugins"][0]["signed"] is False


def test_wheel_with_dependencies_is_refused(api, server, tmp_path):
    key = signing.new_private_key()
    wheel = ss.build_plugin(tmp_path, deps=("requests",))
    _publish(server, tmp_path, key, wheel=wheel)
    assert _put(api, "local", {"url": server.base + "/catalog.json",
                               "public_key": ss.public_key(key)}).status_code == 204  # fmt: skip
    r = _post(api, "install", {"source": "local", "id": "hello"})
    job = api.get(f"/api/v1/store/jobs/{r.json()['job']}").json()
    assert job["state"] == "failed" and "vendor" in job["error"]
    assert env.installed() == []


def test_job_record_outlives_a_dead_worker(api):
    from plugins.store import jobs

    job = jobs.Job.create("job-5-5", "install", "host-plugin-a@1", {})
    job.data["started_at"] = int(time.time()) - 1000
    job.save()
    got = api.get("/api/v1/store/jobs/job-5-5").json()
    assert got["state"] == "failed" and "timed out" in got["error"]


class FakeRunner:
    """Stands in for `plugins.runner_control` (the runner is another module's): on, and the
    plugin either comes up and stays up, or keeps exiting."""

    def __init__(self):
        self.healthy = True
        self.first_seen = None
        self.rescans = 0

    def runtime_enabled(self):
        return True

    def request_rescan(self):
        self.rescans += 1
        self.first_seen = None

    def status(self):
        if not self.healthy:
            return {"hello": {"running": False, "pid": None, "last_exit": 1, "log": ["boom"]}}
        self.first_seen = self.first_seen or time.time()
        return {"hello": {"running": True, "pid": 4242, "started_at": self.first_seen}}


@pytest.mark.timeout(240)
def test_failed_health_check_rolls_back_to_the_kept_wheel(api, server, tmp_path, monkeypatch):
    from plugins.store import install, services

    runner = FakeRunner()
    monkeypatch.setattr(install, "runner_control", runner)
    monkeypatch.setattr(services, "runner_control", runner)
    monkeypatch.setenv("HOST_STORE_HEALTH_S", "5")
    key = signing.new_private_key()
    _publish(server, tmp_path, key)
    assert _put(api, "local", {"url": server.base + "/catalog.json",
                               "public_key": ss.public_key(key)}).status_code == 204  # fmt: skip
    r = _post(api, "install", {"source": "local", "id": "hello"})
    job = api.get(f"/api/v1/store/jobs/{r.json()['job']}").json()
    assert job["state"] == "done" and any("runs (pid 4242)" in x for x in job["log"]), job
    assert api.get("/api/v1/store/installed").json()[0]["running"] is True

    # Version 2 keeps exiting: the job fails and version 1's kept wheel is back.
    _publish(server, tmp_path, key, wheel=ss.build_plugin(tmp_path, version="2.0.0"))
    api.post("/api/v1/store/refresh")
    runner.healthy = False
    r = _post(api, "install", {"source": "local", "id": "hello"})
    job = api.get(f"/api/v1/store/jobs/{r.json()['job']}").json()
    assert job["state"] == "failed" and "rolled back" in job["error"], job
    assert "last exit status 1" in job["error"] and "rolling back" in "\n".join(job["log"])
    assert _env_packages() == {("host-plugin-hello", "1.0.0")}
    row = api.get("/api/v1/store/installed").json()[0]
    assert row["version"] == "1.0.0" and row["update_available"] == "2.0.0"

    # A first install that fails its health check is removed again.
    r = _post(api, "uninstall", {"pkg": "host-plugin-hello"})
    assert api.get(f"/api/v1/store/jobs/{r.json()['job']}").json()["state"] == "done"
    r = _post(api, "install", {"source": "local", "id": "hello"})
    job = api.get(f"/api/v1/store/jobs/{r.json()['job']}").json()
    assert job["state"] == "failed" and "rolled back" in job["error"]
    assert env.installed() == []
