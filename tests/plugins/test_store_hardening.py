"""The store's hardening, with real parts: a real HTTPS catalog server with a test CA, real pip
into a real plugin venv, jobs through Celery's eager mode, real Redis.

- Nothing of the plugin environment runs when the host lists, installs or removes plugins: a
  `.pth` planted in its site-packages (as a wheel installed before the check would leave one)
  never runs, and a wheel carrying a start-up hook is refused.
- A correctly signed but older, reused or expired catalog is refused; the entries of the newest
  one stay offered.
- A plugin id belongs to one distribution: a wheel declaring two entry points, or an id another
  installed distribution holds, is refused; an id two distributions declare runs neither.
"""

from __future__ import annotations

import json
import subprocess
import time

import pytest
from django.test import Client

from plugins import env
from plugins.store import install, signing
from tests.plugins import store_support as ss

MGMT = "c" * 64


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
    monkeypatch.setenv("HOST_STORE_CA_FILE", str(tls[0]))
    monkeypatch.setenv("HOST_STORE_BUILTIN_URL", "https://127.0.0.1:9/catalog.json")
    monkeypatch.setenv("HOST_STORE_HEALTH_S", "2")
    tokens._cache.clear()
    eager = app.conf.task_always_eager
    app.conf.task_always_eager = True
    yield Client(HTTP_AUTHORIZATION=f"Bearer {MGMT}")
    app.conf.task_always_eager = eager
    tokens._cache.clear()


def _put(api, name, url, key):
    body = {"url": url, "public_key": ss.public_key(key)}
    r = api.put(f"/api/v1/store/sources/{name}", json.dumps(body), "application/json")
    assert r.status_code == 204, r.content


def _job(api, kind, body) -> dict:
    r = api.post(f"/api/v1/store/{kind}", json.dumps(body), "application/json")
    assert r.status_code == 202, r.content
    return api.get(f"/api/v1/store/jobs/{r.json()['job']}").json()


def _serve(server, key, wheels, *, path="/catalog.json", over=None, **signed):
    """Serve a signed catalog of these wheels (and the wheels) at `path`."""
    entries = []
    for wheel in wheels:
        server.files["/w/" + wheel.name] = wheel.read_bytes()
        entries.append(ss.entry(wheel, "/w/" + wheel.name, **(over or {})))
    body, sig = ss.signed_catalog(entries, key, **signed)
    server.files[path], server.files[path + ".sig"] = body, sig
    return body


def _local(cat: dict, name="local") -> dict:
    return next(s for s in cat["sources"] if s["name"] == name)


# -- finding: plugin code ran on a listing ---------------------------------------------------
def _plan(wheel, plugin_id="hello"):
    pkg = wheel.name.split("-")[0].replace("_", "-")
    return {"pkg": pkg, "version": wheel.name.split("-")[1], "id": plugin_id}


HOOKS = {
    "evil.pth": "a .pth file",
    "host_plugin_hello-1.0.0.data/purelib/evil.pth": "a .pth file",
    "host_plugin_hello/nested.PTH": "a .pth file",
    "sitecustomize.py": "start-up module",
    "host_plugin_hello-1.0.0.data/platlib/usercustomize/__init__.py": "start-up module",
    "host_plugin_hello-1.0.0.data/scripts/python": "outside site-packages (.data/scripts)",
    "host_plugin_hello-1.0.0.data/data/lib/python3.11/site-packages/x.py": "(.data/data)",
    "host_plugin_hello-1.0.0.data/headers/x.h": "(.data/headers)",
    "../escape.py": "not a relative path",
}


@pytest.mark.parametrize("member", sorted(HOOKS))
def test_a_wheel_with_a_start_up_hook_is_refused(tmp_path, member):
    wheel = ss.rewrite_wheel(ss.build_plugin(tmp_path), add={member: b"import os\n"})
    with pytest.raises(install.JobFailed) as caught:
        install.check_wheel(wheel, _plan(wheel))
    assert HOOKS[member] in str(caught.value) and member in str(caught.value)


def test_a_plain_wheel_passes_and_purelib_data_is_allowed(tmp_path):
    wheel = ss.build_plugin(tmp_path)
    install.check_wheel(wheel, _plan(wheel))
    extra = {"host_plugin_hello-1.0.0.data/purelib/hello_extra.py": b"X = 1\n"}
    install.check_wheel(ss.rewrite_wheel(wheel, add=extra), _plan(wheel))


@pytest.mark.parametrize(
    ("entry_points", "why"),
    [
        ("[hostmgmt.plugins]\nhello = a:main\nother = a:main\n", "exactly one"),
        ("[hostmgmt.plugins]\nhello = a:main\nhello = b:main\n", "exactly one"),
        ("[hostmgmt.plugins]\nother = a:main\n", "named 'hello'"),
        ("[hostmgmt.plugins]\nhello = a:main\n[ console_scripts ]\npython = a:main\n",
         "console_scripts"),
    ],
)  # fmt: skip
def test_entry_points_other_than_the_one_plugin_id_are_refused(tmp_path, entry_points, why):
    wheel = ss.rewrite_wheel(ss.build_plugin(tmp_path), entry_points=entry_points)
    with pytest.raises(install.JobFailed) as caught:
        install.check_wheel(wheel, _plan(wheel))
    assert why in str(caught.value)


def test_a_pth_wheel_is_refused_with_a_reason(api, server, tmp_path):
    marker = tmp_path / "pth-ran"
    hook = f"import os; open({str(marker)!r}, 'w').close()\n".encode()
    key = signing.new_private_key()
    wheel = ss.rewrite_wheel(ss.build_plugin(tmp_path), add={"zzz-hook.pth": hook})
    _serve(server, key, [wheel])
    _put(api, "local", server.base + "/catalog.json", key)
    env.ensure_env()
    job = _job(api, "install", {"source": "local", "id": "hello"})
    assert job["state"] == "failed" and job["phase"] == "verifying", job
    assert "'zzz-hook.pth' is a .pth file" in job["error"]
    assert env.installed_packages() == {} and not marker.exists()


@pytest.mark.timeout(240)
def test_a_planted_pth_never_runs_on_listing_jobs_or_the_plugins_page(
    api, server, tmp_path, restore_config
):
    """The planted `.pth` writes the marker (with the token it saw) whenever an interpreter of
    the plugin environment starts. The Plugins page, GET /store/installed and /store/catalog,
    an install job and an uninstall job all run with the runtime off: none may start one."""
    from access import credentials

    marker = tmp_path / "pth-ran"
    hook = (
        f"import os; open({str(marker)!r}, 'a').write(os.environ.get('HOST_MGMT_TOKEN', '-') + "
        f"'\\n')\n"
    )
    env.ensure_env()
    files = {"planted.pth": hook, "planted/__init__.py": "def main():\n    return 0\n"}
    ss.plant_dist(
        env.site_packages(), "host-plugin-planted", "0.9", {"planted": "planted:main"}, files
    )
    key = signing.new_private_key()
    _serve(server, key, [ss.build_plugin(tmp_path)])
    _put(api, "local", server.base + "/catalog.json", key)

    cat = api.get("/api/v1/store/catalog").json()
    assert [p["id"] for p in cat["plugins"]] == ["hello"]
    assert not marker.exists(), "GET /store/catalog ran the plugin environment"
    rows = api.get("/api/v1/store/installed").json()
    assert [(r["pkg"], r["version"], r["tier"]) for r in rows] == [
        ("host-plugin-planted", "0.9", "cli")
    ]
    assert not marker.exists(), "GET /store/installed ran the plugin environment"
    credentials.set_credentials("admin", "s3cret")
    operator = Client()
    operator.force_login(credentials.admin_user())
    page = operator.get("/plugins")
    assert page.status_code == 200 and "planted" in page.content.decode()
    assert not marker.exists(), "the Plugins page ran the plugin environment"

    job = _job(api, "install", {"source": "local", "id": "hello"})
    assert job["state"] == "done", job
    assert env.installed_packages() == {"host-plugin-hello": "1.0.0", "host-plugin-planted": "0.9"}
    assert not marker.exists(), f"the install job ran it: {marker.read_text()!r}"

    job = _job(api, "uninstall", {"pkg": "host-plugin-planted"})
    assert job["state"] == "done", job
    assert not marker.exists(), f"the uninstall job ran it: {marker.read_text()!r}"
    site = env.site_packages()
    assert not (site / "planted.pth").exists() and not (site / "planted").exists()
    assert [p.pkg for p in env.installed()] == ["host-plugin-hello"]

    # The hook is live code: the environment's interpreter, once started (here with this
    # process's environment, as pip --python started it), runs it and sees the token.
    ss.plant_dist(site, "host-plugin-again", "1", {}, {"again.pth": hook})
    subprocess.run([str(env.env_python()), "-I", "-c", "pass"], check=True, timeout=60)
    assert MGMT in marker.read_text()


def test_pip_gets_no_secret_and_no_host_setting(monkeypatch):
    for name in ("HOST_MGMT_TOKEN", "MY_API_SECRET", "DJANGO_SETTINGS_MODULE", "REDIS_URL",
                 "PYTHONPATH", "PIP_INDEX_URL", "CELERY_BROKER_URL"):  # fmt: skip
        monkeypatch.setenv(name, "x")
    monkeypatch.setenv("LANG", "C.UTF-8")
    child = env.child_env()
    assert child["LANG"] == "C.UTF-8" and "PATH" in child
    assert not {k for k in child if k.startswith(("HOST_", "DJANGO_", "PYTHON", "PIP_"))}
    assert "MY_API_SECRET" not in child and "REDIS_URL" not in child


# -- finding: signed catalogs could be replayed ----------------------------------------------
@pytest.mark.timeout(120)
def test_replayed_reused_and_expired_catalogs_are_refused(api, server, tmp_path):
    key = signing.new_private_key()
    old = ss.build_plugin(tmp_path, version="1.0.0")
    new = ss.build_plugin(tmp_path, version="2.0.0")
    _serve(server, key, [new], serial=2)
    accepted = server.files["/catalog.json"], server.files["/catalog.json.sig"]
    _put(api, "local", server.base + "/catalog.json", key)
    cat = api.get("/api/v1/store/catalog").json()
    assert [p["version"] for p in cat["plugins"]] == ["2.0.0"] and not _local(cat)["error"]

    # Serial 1, correctly signed (an older catalog kept by whoever serves it now): refused.
    _serve(server, key, [old], serial=1)
    cat = api.post("/api/v1/store/refresh").json()
    assert "serial 1 is lower than the 2 already accepted" in _local(cat)["error"]
    assert [p["version"] for p in cat["plugins"]] == ["2.0.0"] and _local(cat)["stale"]
    job = _job(api, "install", {"source": "local", "id": "hello"})
    assert job["state"] == "done" and env.installed_packages() == {"host-plugin-hello": "2.0.0"}

    # Serial 2 again with other bytes (the old entries under the new number): refused.
    _serve(server, key, [old], serial=2)
    cat = api.post("/api/v1/store/refresh").json()
    assert "serial 2 was accepted with other content" in _local(cat)["error"]
    assert [p["version"] for p in cat["plugins"]] == ["2.0.0"]

    # Newer but expired: refused.
    _serve(server, key, [old], serial=3, expires=ss.expires_in(-60))
    cat = api.post("/api/v1/store/refresh").json()
    assert "(serial 3) expired at" in _local(cat)["error"]
    assert [p["version"] for p in cat["plugins"]] == ["2.0.0"]

    # The very catalog accepted last, served again: accepted (a re-fetch).
    server.files["/catalog.json"], server.files["/catalog.json.sig"] = accepted
    assert not _local(api.post("/api/v1/store/refresh").json())["error"]

    # A newer catalog is accepted; once it expires its entries are no longer offered.
    _serve(server, key, [old], serial=4, expires=ss.expires_in(2))
    cat = api.post("/api/v1/store/refresh").json()
    assert [p["version"] for p in cat["plugins"]] == ["1.0.0"] and not _local(cat)["error"]
    time.sleep(2.5)
    cat = api.get("/api/v1/store/catalog").json()
    assert cat["plugins"] == [] and "expired at" in _local(cat)["error"]
    r = api.post("/api/v1/store/install", json.dumps({"source": "local", "id": "hello"}),
                 "application/json")  # fmt: skip
    assert r.status_code == 400 and "expired" in r.json()["error"]

    # A signed catalog without a serial is out of shape.
    body = json.dumps({"format": 1, "plugins": []}).encode()
    server.files["/catalog.json"], server.files["/catalog.json.sig"] = body, signing.sign(key, body)
    cat = api.post("/api/v1/store/refresh").json()
    assert "needs a serial" in _local(cat)["error"]

    # The operator points the source elsewhere: the floor is forgotten with the old pair.
    _serve(server, key, [old], serial=1, path="/mirror/catalog.json")
    _put(api, "local", server.base + "/mirror/catalog.json", key)
    cat = api.get("/api/v1/store/catalog").json()
    assert [p["version"] for p in cat["plugins"]] == ["1.0.0"] and not _local(cat)["error"]


# -- finding: a wheel could take another plugin's id -----------------------------------------
@pytest.mark.timeout(240)
def test_a_wheel_cannot_take_an_installed_plugins_id(api, server, tmp_path):
    key, evil_key = signing.new_private_key(), signing.new_private_key()
    _serve(server, key, [ss.build_plugin(tmp_path)])
    _put(api, "local", server.base + "/catalog.json", key)
    assert _job(api, "install", {"source": "local", "id": "hello"})["state"] == "done"

    # Another source offers a package of another name that declares the id `hello`.
    thief = ss.build_plugin(tmp_path, name="host-plugin-thief", ep_id="hello")
    _serve(server, evil_key, [thief], path="/evil/catalog.json", over={"id": "hello"})
    _put(api, "evil", server.base + "/evil/catalog.json", evil_key)
    job = _job(api, "install", {"source": "evil", "id": "hello"})
    assert job["state"] == "failed" and job["phase"] == "verifying", job
    assert "plugin id 'hello' is held by host-plugin-hello" in job["error"]
    assert env.installed_packages() == {"host-plugin-hello": "1.0.0"}

    # A wheel declaring a second entry point beside its own id.
    two = ss.rewrite_wheel(ss.build_plugin(tmp_path, name="host-plugin-two", ep_id="two"),
                           entry_points="[hostmgmt.plugins]\ntwo = host_plugin_two:main\n"
                           "hello = host_plugin_two:main\n")  # fmt: skip
    _serve(server, evil_key, [two], path="/evil/catalog.json")
    api.post("/api/v1/store/refresh")
    job = _job(api, "install", {"source": "evil", "id": "two"})
    assert job["state"] == "failed" and "exactly one hostmgmt.plugins entry point" in job["error"]
    assert [(p.plugin_id, p.pkg) for p in env.installed()] == [("hello", "host-plugin-hello")]


@pytest.mark.timeout(120)
def test_an_id_two_distributions_declare_runs_neither(tmp_path, monkeypatch):
    """The runner starts what `env.installed()` lists, through `env.launch_argv`: neither lists
    nor starts an id two distributions declare."""
    monkeypatch.setenv("HOST_STATE_DIR", str(tmp_path / "state"))
    env.ensure_env()
    site = env.site_packages()
    for side in ("a", "b"):
        ran = tmp_path / f"{side}-ran"
        code = f"def main():\n    open({str(ran)!r}, 'w').close()\n    return 0\n"
        ss.plant_dist(site, f"host-plugin-twin-{side}", "1.0", {"twin": f"twin_{side}:main"},
                      {f"twin_{side}/__init__.py": code})  # fmt: skip

    done = subprocess.run(env.launch_argv("twin"), capture_output=True, text=True, timeout=60)
    assert done.returncode == 1, done
    assert "plugin id twin is declared by 2 distributions" in done.stderr
    assert "host-plugin-twin-a, host-plugin-twin-b" in done.stderr
    assert not (tmp_path / "a-ran").exists() and not (tmp_path / "b-ran").exists()
    assert env.installed() == []
    assert [d.pkg for d in env.conflicts()["twin"]] == ["host-plugin-twin-a", "host-plugin-twin-b"]

    # Removing one claimant settles it: the other runs.
    assert env.remove_dist("host-plugin-twin-b") == ["host_plugin_twin_b-1.0.dist-info"]
    assert not (site / "twin_b").exists()
    assert [(p.plugin_id, p.pkg) for p in env.installed()] == [("twin", "host-plugin-twin-a")]
    done = subprocess.run(env.launch_argv("twin"), capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and (tmp_path / "a-ran").exists(), done


def test_the_installed_view_shows_a_conflict_rather_than_picking_one(api):
    env.ensure_env()
    for side in ("a", "b"):
        ss.plant_dist(env.site_packages(), f"host-plugin-twin-{side}", "1.0",
                      {"twin": f"twin_{side}:main"}, {f"twin_{side}/__init__.py": ""})  # fmt: skip
    rows = api.get("/api/v1/store/installed").json()
    assert [(r["pkg"], r["plugin_id"], r["running"]) for r in rows] == [
        ("host-plugin-twin-a", "twin", False), ("host-plugin-twin-b", "twin", False)
    ]  # fmt: skip
    assert "also declared by host-plugin-twin-b" in rows[0]["conflict"]
    assert "also declared by host-plugin-twin-a" in rows[1]["conflict"]
