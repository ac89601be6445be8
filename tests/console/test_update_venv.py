"""The staged tree's own venv, made for real from a copy of this repository's venv: same
requirements take no network and leave it independent of the checkout's; changed ones go
through the wheel cache (a tiny wheel served by a local index here); a pip failure fails the
apply before the switch."""

from __future__ import annotations

import base64
import hashlib
import io
import subprocess
import tarfile
import threading
import zipfile
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from common import update_journal
from console import update_apply, update_venv

REPO = Path(__file__).resolve().parents[2]
REQS = b"# the test checkout's requirements: what its venv already has\n"


@pytest.fixture(scope="module")
def running_venv(tmp_path_factory):
    """A venv like the checkout's (this repository's packages, Django among them), made the
    cheap way once for the module."""
    where = tmp_path_factory.mktemp("running")
    update_venv.clone(REPO / ".venv", where / ".venv", where / "log")
    return where / ".venv"


@pytest.fixture
def root(tmp_path, running_venv):
    tree = tmp_path / "host"
    tree.mkdir()
    (tree / "requirements.txt").write_bytes(REQS)
    update_venv.link_tree(running_venv, tree / ".venv")  # its own copy: the tests change it
    return tree


def _python(venv: Path, code: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [str(venv / "bin" / "python"), "-c", code], capture_output=True, text=True, timeout=60
    )


def _staged(tmp_path: Path, reqs: bytes) -> Path:
    staged = tmp_path / "host.releases" / "v2"
    staged.mkdir(parents=True)
    (staged / "requirements.txt").write_bytes(reqs)
    return staged


def test_same_requirements_give_an_own_venv_the_checkout_cannot_change(tmp_path, root):
    staged = _staged(tmp_path, REQS)
    how = update_venv.build(root, staged, tmp_path / "wheels", tmp_path / "log")
    assert "hard-linked" in how
    venv = staged / ".venv"
    assert venv.is_dir() and not venv.is_symlink()
    where = _python(venv, "import django, sys; print(django.__file__); print(sys.prefix)")
    assert where.returncode == 0, where.stderr
    assert where.stdout.split() == [
        str(update_venv.site_packages(venv) / "django" / "__init__.py"),
        str(venv),
    ]
    # No console script of the running venv (their shebangs name its python) came along.
    for script in (venv / "bin").iterdir():
        if script.is_file() and not script.is_symlink():
            assert str(root) not in script.read_text(errors="replace").partition("\n")[0]
    assert not (tmp_path / "wheels").exists()  # no network, no cache
    # The checkout's venv changes (as pip changes one: files removed and written anew).
    django = update_venv.site_packages(root / ".venv") / "django"
    init = (django / "__init__.py").read_bytes()
    subprocess.run(["rm", "-rf", str(django)], check=True)
    django.mkdir()
    (django / "__init__.py").write_text("raise ImportError('changed under the applied tree')\n")
    assert _python(root / ".venv", "import django").returncode != 0
    after = _python(venv, "import django; print(django.get_version())")
    assert after.returncode == 0, after.stderr
    assert (update_venv.site_packages(venv) / "django" / "__init__.py").read_bytes() == init


def _wheel(dest: Path, name: str, version: str) -> Path:
    files = {
        f"{name}/__init__.py": f"VERSION = {version!r}\n".encode(),
        f"{name}-{version}.dist-info/METADATA": (
            f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n".encode()
        ),
        f"{name}-{version}.dist-info/WHEEL": (
            b"Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
        ),
    }
    record = []
    for path, data in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        record.append(f"{path},sha256={digest},{len(data)}")
    record.append(f"{name}-{version}.dist-info/RECORD,,")
    files[f"{name}-{version}.dist-info/RECORD"] = ("\n".join(record) + "\n").encode()
    wheel = dest / f"{name}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as zf:
        for path, data in files.items():
            zf.writestr(path, data)
    return wheel


@pytest.fixture
def index(tmp_path, monkeypatch):
    """A package index on loopback serving one tiny wheel; pip is pointed at it."""
    served = tmp_path / "index"
    (served / "files").mkdir(parents=True)
    wheel = _wheel(served / "files", "tinypkg", "1.0")
    (served / "simple" / "tinypkg").mkdir(parents=True)
    (served / "simple" / "tinypkg" / "index.html").write_text(
        f'<html><body><a href="/files/{wheel.name}">{wheel.name}</a></body></html>'
    )
    requests = []

    class Handler(SimpleHTTPRequestHandler):
        def log_message(self, fmt, *args):
            requests.append(self.path)

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), partial(Handler, directory=str(served)))
    threading.Thread(target=httpd.serve_forever, args=(0.05,), daemon=True).start()
    base = f"http://127.0.0.1:{httpd.server_port}"
    monkeypatch.setenv("PIP_INDEX_URL", f"{base}/simple/")
    monkeypatch.setenv("PIP_RETRIES", "0")
    yield requests, base
    httpd.shutdown()


def test_changed_requirements_are_installed_from_the_wheel_cache(tmp_path, root, index):
    requests, _ = index
    staged = _staged(tmp_path, REQS + b"tinypkg==1.0\n")
    cache = tmp_path / "wheels"
    how = update_venv.build(root, staged, cache, tmp_path / "log")
    assert "wheel cache" in how
    assert [p.name for p in cache.iterdir()] == ["tinypkg-1.0-py3-none-any.whl"]
    assert any(path.startswith("/files/tinypkg") for path in requests)  # fetched once, into it
    got = _python(staged / ".venv", "import tinypkg, django; print(tinypkg.VERSION)")
    assert got.returncode == 0 and got.stdout.strip() == "1.0", got.stderr
    assert _python(root / ".venv", "import tinypkg").returncode != 0  # the checkout's: untouched
    # The install itself takes the cache alone: the index is not asked again.
    requests.clear()
    again = staged.parent / "v3"
    again.mkdir()
    (again / "requirements.txt").write_bytes(REQS + b"tinypkg==1.0\n")
    update_venv.clone(root / ".venv", again / ".venv", tmp_path / "log")
    log = tmp_path / "log"
    update_venv.install_from_cache(again / ".venv", again / "requirements.txt", cache, log)
    assert _python(again / ".venv", "import tinypkg").returncode == 0
    assert requests == []


def _archive(files: dict[str, bytes]) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for name, data in files.items():
            info = tarfile.TarInfo("host-x/" + name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def test_a_pip_failure_fails_the_apply_before_the_switch(tmp_path, root, index, monkeypatch):
    monkeypatch.setenv("HOST_STATE_DIR", str(tmp_path / "state"))
    body = _archive({"manage.py": b"import sys\n", "requirements.txt": REQS + b"tinypkg==2.0\n"})
    archive = tmp_path / "index" / "files" / "host.tar.gz"
    archive.write_bytes(body)
    source = {"commit": "a" * 40, "url": f"{index[1]}/files/host.tar.gz",
              "sha256": hashlib.sha256(body).hexdigest(), "size": len(body)}  # fmt: skip
    manifest = {"version": "v2099.101.0-stable", "serial": 2, "artifacts": {"source": source}}
    with pytest.raises(update_apply.ApplyError, match="pip wheel exited with 1"):
        update_apply.prepare(manifest, root)
    journal = update_apply.load_journal()
    assert journal["state"] == "failed" and journal["step"] == "environment"
    assert "tinypkg==2.0" in journal["error"]  # the last lines of pip's output
    assert update_journal.active_tree() is None
    assert not update_apply.releases_dir(root).joinpath("v2099.101.0-stable").exists()
    assert not list(update_apply.updates_dir().glob("environment-*.log"))
