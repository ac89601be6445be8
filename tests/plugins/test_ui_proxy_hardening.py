"""The console's proxy to a plugin UI against a real plugin process under the real runner
(confined by bubblewrap): response headers that would act on the console's origin never reach
the browser, redirects stay inside the plugin's UI, and a registration (or a stale one) naming a
loopback port the plugin's own process does not listen on is refused."""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from django.test import Client

from access import credentials, plugin_tokens
from common import statedir
from plugins import registry, runner, runner_control
from tests.plugins.plugin_build import install

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.timeout(180)]

# A plugin whose UI answers with every header a hostile plugin would use on the console.
EVIL_UI = r"""
import http.server, json, os, secrets, threading, time

SECRET = secrets.token_urlsafe(24)
REDIRECTS = {"/out": "https://evil.example/", "/scheme-relative": "//evil.example/x",
             "/a/b/in": "../../../../c/d?x=1", "/abs": "/e"}

class Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        if self.headers.get("X-Plugin-Secret") != SECRET:
            self.send_error(403)
            return
        if self.path in REDIRECTS:
            self.send_response(302)
            self.send_header("Location", REDIRECTS[self.path])
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        body = b"<h1>evil ui</h1>"
        self.send_response(200)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        self.send_header("ETag", '"v1"')
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Location", "https://evil.example/")
        self.send_header("Refresh", "0; url=https://evil.example/")
        self.send_header("Clear-Site-Data", '"*"')
        self.send_header("Service-Worker-Allowed", "/")
        self.send_header("Set-Cookie", "sessionid=evil; Path=/")
        self.send_header("Access-Control-Allow-Origin", "*")
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass

def main():
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    data = os.environ["HOST_PLUGIN_DATA_DIR"]
    with open(os.path.join(data, "ui.json.tmp"), "w") as fh:
        json.dump({"port": server.server_address[1], "secret": SECRET}, fh)
    os.replace(os.path.join(data, "ui.json.tmp"), os.path.join(data, "ui.json"))
    print("evil ui up", flush=True)
    server.serve_forever()
"""
ADMIN = "1" * 64
REFUSED_HEADERS = ("Location", "Refresh", "Clear-Site-Data", "Service-Worker-Allowed",
                   "Set-Cookie", "Access-Control-Allow-Origin")  # fmt: skip


@pytest.fixture
def operator(bus, restore_config, monkeypatch):
    monkeypatch.setenv("HOST_MGMT_TOKEN", ADMIN)
    credentials.set_credentials("admin", "s3cret")
    c = Client()
    c.force_login(credentials.admin_user())
    return c


@pytest.fixture
def foreign():
    """Another local HTTP service, not the plugin's: it must never be reached via the proxy."""
    seen = []

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):
            seen.append(self.path)
            self.send_response(200)
            self.send_header("Content-Length", "7")
            self.end_headers()
            self.wfile.write(b"foreign")

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield server.server_address[1], seen
    server.shutdown()
    server.server_close()


@pytest.fixture
def evil_plugin(operator, tmp_path):
    """The plugin installed and run by a real, confined runner ticking in a thread."""
    install(tmp_path / "build", {"evilui": EVIL_UI})
    sandbox, why = runner.make_sandbox([statedir.state_dir()])
    assert sandbox is not None, f"plugin confinement needs bubblewrap (bwrap): {why}"
    r = runner.Runner("https://127.0.0.1:1/api/v1", "/nonexistent-ca.pem", sandbox=sandbox)
    runner_control.set_runtime_enabled(True)
    stop = threading.Event()

    def ticking():
        while not stop.is_set():
            r.tick()
            time.sleep(0.1)

    thread = threading.Thread(target=ticking, daemon=True)
    thread.start()
    ui_file = runner.data_dir("evilui") / "ui.json"
    deadline = time.monotonic() + 30
    while not ui_file.exists():
        assert time.monotonic() < deadline, f"the plugin's UI did not come up: {list(r.plugins)}"
        time.sleep(0.1)
    try:
        yield json.loads(ui_file.read_text())
    finally:
        stop.set()
        thread.join(5)
        runner_control.set_runtime_enabled(False)
        r.stop_all()


def _put(plugin_id: str, token: str, body: dict):
    return Client().put(
        f"/api/v1/plugins/{plugin_id}",
        data=json.dumps(body),
        content_type="application/json",
        HTTP_AUTHORIZATION=f"Bearer {token}",
    )


def test_only_allow_listed_headers_reach_the_console(operator, evil_plugin):
    token = plugin_tokens.ensure("evilui")
    r = _put("evilui", token, {"title": "Evil", "ui": evil_plugin})
    assert r.status_code == 204, r.content
    r = operator.get("/plugins/evilui/ui/")
    assert r.status_code == 200 and r.content == b"<h1>evil ui</h1>"
    for name in REFUSED_HEADERS:
        assert name not in r.headers, (name, r.headers[name])
    assert r["ETag"] == '"v1"'  # allow-listed (Cache-Control too, but the console sets no-store)
    assert r["Content-Type"] == "text/html; charset=utf-8"
    assert "sandbox" in r["Content-Security-Policy"]

    # redirects: leaving the plugin's UI is a 502; inside it, re-rooted under the proxy
    for path in ("out", "scheme-relative"):
        r = operator.get(f"/plugins/evilui/ui/{path}")
        assert r.status_code == 502, (path, r.status_code, r.headers.get("Location"))
        assert b"redirected outside its UI" in r.content
    r = operator.get("/plugins/evilui/ui/a/b/in")
    assert r.status_code == 302 and r["Location"] == "/plugins/evilui/ui/c/d?x=1"
    r = operator.get("/plugins/evilui/ui/abs")
    assert r.status_code == 302 and r["Location"] == "/plugins/evilui/ui/e"


def test_a_port_the_plugin_does_not_listen_on_is_refused(operator, evil_plugin, foreign):
    port, seen = foreign
    token = plugin_tokens.ensure("evilui")
    secret = evil_plugin["secret"]
    r = _put("evilui", token, {"title": "Evil", "ui": {"port": port, "secret": secret}})
    assert r.status_code == 400, r.content
    fields = {f["field"]: f for f in r.json()["fields"]}
    assert set(fields) == {"ui.port"}
    assert f"127.0.0.1:{port} is not listened on by plugin evilui" in json.dumps(fields)
    assert registry.get("evilui") is None
    # the management token cannot point a plugin's UI elsewhere either
    r = _put("evilui", ADMIN, {"title": "Evil", "ui": {"port": port, "secret": secret}})
    assert r.status_code == 400
    # a plugin the runner does not run gets no UI at all
    r = _put("other", ADMIN, {"title": "Other", "ui": {"port": port, "secret": secret}})
    assert r.status_code == 400 and "not running under the host's plugin runner" in r.text

    # a registration that got in anyway (stored directly): the proxy checks again
    registry.register("evilui", {"title": "Evil", "ui": {"port": port, "secret": secret}})
    r = operator.get("/plugins/evilui/ui/")
    assert r.status_code == 502 and b"not listened on by plugin evilui" in r.content
    assert seen == []  # the foreign service never got a request

    # its own port is accepted
    r = _put("evilui", token, {"title": "Evil", "ui": evil_plugin})
    assert r.status_code == 204
    assert operator.get("/plugins/evilui/ui/").status_code == 200
