"""Builders of fixture store trees (Steam, Heroic, Lutris), images and a stand-in art CDN."""

from __future__ import annotations

import http.server
import json
import sqlite3
import threading
from pathlib import Path

import cv2
import numpy as np
import vdf


def png_bytes(w: int = 60, h: int = 90, color=(0, 128, 255)) -> bytes:
    img = np.zeros((h, w, 3), dtype=np.uint8)
    img[:] = color
    ok, out = cv2.imencode(".png", img)
    assert ok
    return out.tobytes()


def jpeg_bytes(w: int = 60, h: int = 90, color=(255, 0, 0)) -> bytes:
    img = np.zeros((h, w, 3), dtype=np.uint8)
    img[:] = color
    ok, out = cv2.imencode(".jpg", img)
    assert ok
    return out.tobytes()


def zip_named_png() -> bytes:
    """A ZIP archive: what a 'PNG that is really a ZIP' holds."""
    import io
    import zipfile

    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        zf.writestr("evil.txt", "not an image")
    return buf.getvalue()


def write_manifest(library: Path, appid: int | str, name: str, installdir: str | None = None):
    apps = library / "steamapps"
    apps.mkdir(parents=True, exist_ok=True)
    state = {"appid": str(appid), "name": name, "installdir": installdir or name}
    (apps / f"appmanifest_{appid}.acf").write_text(vdf.dumps({"AppState": state}, pretty=True))


def make_steam(base: Path, main: dict, extra: dict) -> tuple[Path, Path]:
    """A Steam root with its own library plus a second library folder elsewhere."""
    root, second = base / "Steam", base / "SteamLibrary2"
    (root / "steamapps").mkdir(parents=True)
    (second / "steamapps").mkdir(parents=True)
    folders = {
        "libraryfolders": {
            "0": {"path": str(root), "apps": {str(k): "1" for k in main}},
            "1": {"path": str(second), "apps": {str(k): "1" for k in extra}},
        }
    }
    (root / "steamapps" / "libraryfolders.vdf").write_text(vdf.dumps(folders, pretty=True))
    for appid, name in main.items():
        write_manifest(root, appid, name)
    for appid, name in extra.items():
        write_manifest(second, appid, name)
    return root, second


def make_heroic(base: Path, games: dict[str, str]) -> Path:
    """Heroic config dir: legendary games in the library cache, one GOG game via installed.json."""
    root = base / "heroic"
    (root / "store_cache").mkdir(parents=True)
    library = []
    for app_name, title in games.items():
        install = base / "Games" / app_name
        install.mkdir(parents=True)
        library.append(
            {
                "app_name": app_name,
                "title": title,
                "is_installed": True,
                "install": {"install_path": str(install)},
                "art_square": f"https://cdn.example/{app_name}.jpg",
                "art_logo": "file:///etc/passwd",
            }
        )
    library.append({"app_name": "NotInstalled", "title": "Not Installed", "is_installed": False})
    (root / "store_cache" / "legendary_library.json").write_text(json.dumps({"library": library}))
    gog_dir = base / "Games" / "gog-witcher"
    gog_dir.mkdir(parents=True)
    (root / "store_cache" / "gog_library.json").write_text(
        json.dumps({"games": [{"app_name": "1207658924", "title": "The Witcher"}]})
    )
    (root / "gog_store").mkdir()
    (root / "gog_store" / "installed.json").write_text(
        json.dumps({"installed": [{"appName": "1207658924", "install_path": str(gog_dir)}]})
    )
    return root


def make_lutris(base: Path, games: list[tuple[int, str, int]]) -> Path:
    db = base / "lutris" / "pga.db"
    db.parent.mkdir(parents=True)
    con = sqlite3.connect(db)
    con.execute(
        "CREATE TABLE games (id INTEGER PRIMARY KEY, name TEXT, slug TEXT, runner TEXT, "
        "directory TEXT, installed INTEGER)"
    )
    con.executemany(
        "INSERT INTO games (id, name, slug, runner, directory, installed) VALUES (?,?,?,?,?,?)",
        [(gid, name, name.lower(), "wine", f"/games/{gid}", inst) for gid, name, inst in games],
    )
    con.commit()
    con.close()
    return db


def store_env(base: Path) -> dict[str, str]:
    return {
        "HOST_STEAM_ROOTS": str(base / "Steam"),
        "HOST_HEROIC_ROOTS": str(base / "heroic"),
        "HOST_LUTRIS_DB": str(base / "lutris" / "pga.db"),
    }


class CDN:
    """A local HTTP server standing in for the art CDN and the cover image host."""

    def __init__(self):
        self.files: dict[str, bytes] = {}
        self.hits: list[str] = []
        files, hits = self.files, self.hits

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):  # stdlib name
                hits.append(self.path)
                if self.path.startswith("/redirect"):
                    self.send_response(302)
                    self.send_header("Location", "/steam/apps/570/header.jpg")
                    self.end_headers()
                    return
                data = files.get(self.path)
                if data is None:
                    self.send_response(404)
                    self.end_headers()
                    return
                self.send_response(200)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()
