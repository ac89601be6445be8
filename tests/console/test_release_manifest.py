"""The release format: scripts/sign_release.py builds an archive and a signed manifest whose
artifacts the updater verifies; malformed artifacts refuse the whole manifest."""

from __future__ import annotations

import base64
import hashlib
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from console import update_apply, updater
from tests.support.release_signing import signed

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "sign_release.py"
VERSION = "v2099.101.0-stable"


def _pub(key: Ed25519PrivateKey) -> str:
    raw = key.public_key().public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    return base64.b64encode(raw).decode()


def _source(**over) -> dict:
    entry = {
        "commit": "a" * 40,
        "url": "https://example.org/host.tar.gz",
        "sha256": "b" * 64,
        "size": 1000,
    }
    entry.update(over)
    return entry


def _payload(artifacts) -> dict:
    return {"version": VERSION, "serial": 5, "artifacts": artifacts}


def test_script_builds_an_archive_and_a_manifest_the_updater_believes(tmp_path):
    key_file = tmp_path / "key.pem"
    pub = subprocess.run(
        [sys.executable, str(SCRIPT), "keygen", str(key_file)],
        check=True, capture_output=True, text=True,
    ).stdout.strip()  # fmt: skip
    assert key_file.stat().st_mode & 0o077 == 0
    out = tmp_path / "out"
    subprocess.run(
        [sys.executable, str(SCRIPT), "build", str(key_file), VERSION, "7",
         "http://127.0.0.1:8000/rel/", str(out)],
        check=True, capture_output=True,
    )  # fmt: skip
    manifest = updater.verify_manifest((out / "manifest.json").read_bytes(), pub)
    source = manifest["artifacts"]["source"]
    archive = out / f"host-{VERSION}.tar.gz"
    data = archive.read_bytes()
    assert source["sha256"] == hashlib.sha256(data).hexdigest() and source["size"] == len(data)
    assert source["url"] == f"http://127.0.0.1:8000/rel/host-{VERSION}.tar.gz"
    head = subprocess.run(
        ["git", "-C", str(ROOT), "rev-parse", "HEAD"], check=True, capture_output=True, text=True
    ).stdout.strip()
    assert source["commit"] == head and manifest["serial"] == 7
    with tarfile.open(archive) as tar:
        assert f"host-{VERSION}/manage.py" in tar.getnames()
    staged = tmp_path / "rel" / VERSION  # git's pax header and modes stage as they are
    update_apply.stage(archive, staged)
    at_head = subprocess.run(
        ["git", "-C", str(ROOT), "show", "HEAD:manage.py"], check=True, capture_output=True
    ).stdout
    assert (staged / "manage.py").read_bytes() == at_head
    assert (staged / "scripts" / "system-deps.sh").stat().st_mode & 0o111
    # Another key does not verify it.
    with pytest.raises(updater.ManifestError, match="signature"):
        updater.verify_manifest(
            (out / "manifest.json").read_bytes(), _pub(Ed25519PrivateKey.generate())
        )


def test_report_only_manifest_has_no_artifacts():
    key = Ed25519PrivateKey.generate()
    manifest = updater.verify_manifest(signed({"version": VERSION, "serial": 1}, key), _pub(key))
    assert "artifacts" not in manifest


@pytest.mark.parametrize(
    ("artifacts", "reason"),
    [
        ({}, "lack a `source` entry"),
        ([], "lack a `source` entry"),
        ({"source": _source(commit="abc")}, "commit"),
        ({"source": _source(url="http://example.org/x.tar.gz")}, "url"),
        ({"source": _source(url="ftp://127.0.0.1/x")}, "url"),
        ({"source": _source(sha256="B" * 64)}, "sha256"),
        ({"source": _source(size=0)}, "size"),
        ({"source": _source(size=True)}, "size"),
        ({"source": _source(size=updater.MAX_ARCHIVE_BYTES + 1)}, "size"),
    ],
)
def test_malformed_artifacts_refuse_the_manifest(artifacts, reason):
    key = Ed25519PrivateKey.generate()
    with pytest.raises(updater.ManifestError, match=reason):
        updater.verify_manifest(signed(_payload(artifacts), key), _pub(key))


def test_loopback_http_and_https_artifacts_are_accepted():
    key = Ed25519PrivateKey.generate()
    for url in ("http://127.0.0.1:9/x.tar.gz", "http://localhost/x", "https://example.org/x"):
        manifest = updater.verify_manifest(
            signed(_payload({"source": _source(url=url)}), key), _pub(key)
        )
        assert manifest["artifacts"]["source"]["url"] == url
