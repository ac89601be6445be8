"""Example host plugin (the template of docs/plugins.md): a library provider that publishes the
`.desktop` files of one folder as library entries, registers itself with the host every 30 s
and serves a small loopback UI that only the host's console proxy can open.

Standard library only. Everything it needs comes from the environment the runner sets:
HOST_MGMT_URL, HOST_PLUGIN_TOKEN (this plugin's own token), HOST_PLUGIN_ID, HOST_CA_FILE.
Its own setting: DESKTOP_FOLDER_DIR (default ~/.local/share/applications).
"""

from __future__ import annotations

import configparser
import hmac
import html
import json
import os
import re
import secrets
import signal
import ssl
import sys
import threading
import urllib.error
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

PROVIDER = "desktop-folder"
RENEW_S = 30.0
MAX_ENTRIES = 500
_FIELD_CODE = re.compile(r"\s*%[fFuUdDnNickvm]")


def say(message: str, *, err: bool = False) -> None:
    """A log line: the runner puts stdout (info) and stderr (warning) into the host's log."""
    stream = sys.stderr if err else sys.stdout
    stream.write(message + "\n")
    stream.flush()


class Host:
    """The management API, over TLS verified against the host's certificate."""

    def __init__(self):
        self.base = os.environ["HOST_MGMT_URL"].rstrip("/")
        self.token = os.environ["HOST_PLUGIN_TOKEN"]
        self.ctx = ssl.create_default_context(cafile=os.environ.get("HOST_CA_FILE") or None)

    def call(self, method: str, path: str, body=None) -> int:
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(self.base + path, data=data, method=method)
        req.add_header("Authorization", f"Bearer {self.token}")
        if data is not None:
            req.add_header("Content-Type", "application/json")
        try:
            with urllib.request.urlopen(req, context=self.ctx, timeout=10) as resp:
                resp.read()
                return resp.status
        except urllib.error.HTTPError as exc:
            detail = exc.read()[:300].decode("utf-8", "replace")
            say(f"{method} {path}: HTTP {exc.code} {detail}", err=True)
            return exc.code


def read_entries(folder: Path) -> list[dict]:
    """One library entry per visible Application .desktop file, sorted by file name."""
    out = []
    for path in sorted(folder.glob("*.desktop"))[:MAX_ENTRIES]:
        parser = configparser.ConfigParser(interpolation=None, strict=False)
        try:
            parser.read_string(path.read_text(encoding="utf-8", errors="replace"))
            entry = parser["Desktop Entry"]
        except (configparser.Error, KeyError, OSError):
            continue
        if entry.get("Type", "Application") != "Application":
            continue
        hidden = entry.get("NoDisplay", "") + entry.get("Hidden", "")
        if "true" in hidden.lower():
            continue
        name = entry.get("Name", "").strip()[:256]
        command = _FIELD_CODE.sub("", entry.get("Exec", "")).strip()[:4096]
        if not name or not command:
            continue
        out.append(
            {
                "external_id": path.stem[:256],
                "title": name,
                "launch": {"kind": "command", "value": command},
                "platform": "linux",
            }
        )
    return out


def make_ui(secret: str, state: dict) -> ThreadingHTTPServer:
    """The plugin's UI on 127.0.0.1 (an ephemeral port): answers only requests carrying the
    secret in `X-Plugin-Secret`, which only the host's console proxy knows."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):  # http.server's naming
            given = self.headers.get("X-Plugin-Secret", "")
            if not hmac.compare_digest(given.encode(), secret.encode()):
                self.send_error(403, "missing or wrong plugin secret")
                return
            rows = "".join(
                f"<li>{html.escape(e['title'])} <code>{html.escape(e['launch']['value'])}</code>"
                "</li>"
                for e in state.get("entries", [])
            )
            body = (
                "<!doctype html><meta charset=utf-8><title>Desktop folder</title>"
                f"<h1>Desktop folder</h1><p>Folder: <code>{html.escape(state['folder'])}</code>"
                f" &middot; {len(state.get('entries', []))} entries published</p><ul>{rows}</ul>"
            ).encode()
            self.send_response(200)
            self.send_header("Content-Type", "text/html; charset=utf-8")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, fmt, *args):
            say("ui: " + fmt % args)

    return ThreadingHTTPServer(("127.0.0.1", 0), Handler)


def main() -> int:
    plugin_id = os.environ.get("HOST_PLUGIN_ID", "desktop-folder")
    folder = Path(os.environ.get("DESKTOP_FOLDER_DIR") or "~/.local/share/applications")
    folder = folder.expanduser()
    host = Host()
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    secret = secrets.token_urlsafe(32)
    state: dict = {"folder": str(folder), "entries": []}
    ui = make_ui(secret, state)
    threading.Thread(target=ui.serve_forever, daemon=True).start()
    port = ui.server_address[1]
    say(f"desktop-folder: serving {folder}, UI on 127.0.0.1:{port}")
    registration = {
        "title": "Desktop folder",
        "version": "0.1.0",
        "ui": {"port": port, "secret": secret, "icon": "folder"},
    }
    published = None
    while not stop.is_set():
        try:
            host.call("PUT", f"/plugins/{plugin_id}", registration)
            entries = read_entries(folder) if folder.is_dir() else []
            state["entries"] = entries
            if (
                entries != published
                and host.call("PUT", f"/library/provider/{PROVIDER}", entries) == 200
            ):
                published = entries
                say(f"desktop-folder: published {len(entries)} entries")
        except (OSError, ValueError) as exc:  # the host restarting: try again next round
            say(f"desktop-folder: host unreachable: {exc}", err=True)
        stop.wait(RENEW_S)
    try:
        host.call("DELETE", f"/plugins/{plugin_id}")
    except OSError:
        pass
    ui.shutdown()
    return 0
