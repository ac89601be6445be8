"""scripts/sign_catalog.py, run as a maintainer runs it: it signs only what the host will accept."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from plugins.store import catalog, signing

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "sign_catalog.py"


def _run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True,
                          timeout=60)  # fmt: skip


def test_the_script_refuses_a_catalog_without_serial_and_signs_one_the_host_accepts(tmp_path):
    key = tmp_path / "key.pem"
    made = _run("keygen", str(key))
    assert made.returncode == 0, made.stderr
    public = made.stdout.strip()

    bare = tmp_path / "bare.json"
    bare.write_text(json.dumps({"format": 1, "plugins": []}))
    refused = _run("sign", str(key), str(bare))
    assert refused.returncode != 0
    assert "serial" in refused.stderr
    assert not Path(f"{bare}.sig").exists()

    good = tmp_path / "catalog.json"
    good.write_text(json.dumps({"format": 1, "serial": 7, "expires": "2099-01-01T00:00:00+00:00",
                                "plugins": []}))  # fmt: skip
    signed = _run("sign", str(key), str(good))
    assert signed.returncode == 0, signed.stderr
    data = good.read_bytes()
    assert signing.verify(public, data, Path(f"{good}.sig").read_bytes())
    assert catalog.validity(data)[0] == 7
