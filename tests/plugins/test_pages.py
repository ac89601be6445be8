"""The Plugins page and the UI proxy in process, against a real loopback HTTP server playing
the plugin's UI: the secret goes to the plugin and never to the browser, the operator's
cookies never to the plugin, the page is sandboxed, a dead plugin is a 502."""

from __future__ import annotations

import os
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from django.test import Client

from access import credentials
from plugins import registry, runner_control

pytestmark = pytest.mark.django_db(transaction=True)

SECRET = "Zz0123456789abcdef-_"


@pytest.fixture
def upstream():
    seen = []

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):
            seen.append((self.path, dict(self.headers)))
            if self.headers.get("X-Plugin-Secret") != SECRET:
                self.send_error(403)
                return
            body = b"<h1>plugin ui</h1>"
            self.send_response(200)
            self.send_header("Content-Type", "text/html")
            self.send_header("Set-Cookie", "sessionid=evil")
            self.send_header("Connection", "close")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield server.server_address[1], seen
    server.shutdown()
    server.server_close()


@pytest.fixture
def operator(bus, restore_config):
    credentials.set_credentials("admin", "s3cret")
    c = Client()
    c.force_login(credentials.admin_user())
    return c


def test_proxy_passes_the_secret_to_the_plugin_only(operator, upstream):
    port, seen = upstream
    registry.register("demo", {"title": "Demo", "ui": {"port": port, "secret": SECRET}})
    # the port must be listened on by the plugin's own process: here this one (its server)
    runner_control.write_status({"demo": {"pid": os.getpid(), "running": True}})
    r = operator.get("/plugins/demo/ui/sub/page?x=1", HTTP_X_PLUGIN_SECRET="forged")
    assert r.status_code == 200 and r.content == b"<h1>plugin ui</h1>"
    path, headers = seen[-1]
    assert path == "/sub/page?x=1"
    assert headers["X-Plugin-Secret"] == SECRET
    assert "Cookie" not in headers and "Authorization" not in headers
    assert "Set-Cookie" not in r.headers
    assert "sandbox" in r["Content-Security-Policy"]
    assert "allow-same-origin" not in r["Content-Security-Policy"]
    assert SECRET not in r.content.decode() + str(dict(r.headers))
    # not for anonymous visitors; never a write; unknown and dead plugins
    assert Client().get("/plugins/demo/ui/").status_code == 302
    assert operator.post("/plugins/demo/ui/").status_code == 405
    assert operator.get("/plugins/nobody/ui/").status_code == 404
    registry.register("dead", {"title": "Dead", "ui": {"port": 1024, "secret": SECRET}})
    assert operator.get("/plugins/dead/ui/").status_code == 502


def test_plugins_page_lists_registered_and_switches_the_runner(operator):
    registry.register("manual-one", {"title": "Run by hand", "version": "2.0"})
    r = operator.get("/plugins")
    text = r.content.decode()
    assert r.status_code == 200 and "manual-one" in text and "Run by hand" in text
    assert 'href="/plugins"' in text  # linked in the nav
    assert Client().get("/plugins").status_code == 302
    r = operator.post("/plugins", {"enabled": "on"})
    assert r.status_code == 302 and runner_control.runtime_enabled() is True
    operator.post("/plugins", {})
    assert runner_control.runtime_enabled() is False


def test_the_plugins_page_names_an_id_two_distributions_declare(operator):
    from plugins import env
    from tests.plugins import store_support as ss

    env.ensure_env()
    for side in ("a", "b"):
        ss.plant_dist(env.site_packages(), f"host-plugin-twin-{side}", "1.0",
                      {"twin": f"twin_{side}:main"}, {f"twin_{side}/__init__.py": ""})  # fmt: skip
    body = operator.get("/plugins").content.decode()
    assert 'data-conflict="twin"' in body
    assert "host-plugin-twin-a 1.0, host-plugin-twin-b 1.0: none of them runs" in body
    assert 'data-plugin="twin"' not in body
