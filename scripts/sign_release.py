#!/usr/bin/env python3
"""Make a release signing key, and build and sign a release (docs/updates.md, "A release").

    python scripts/sign_release.py keygen KEY.pem       # prints the public key to pin
    python scripts/sign_release.py build KEY.pem VERSION SERIAL BASE_URL OUT_DIR [--commit REV]

`build` archives the commit (default HEAD) with `git archive` into
OUT_DIR/host-VERSION.tar.gz and writes OUT_DIR/manifest.json: the payload names the commit, the
archive's URL (BASE_URL + its file name), sha256 and size, signed with the key from KEY.pem.
Raise SERIAL with every publication (the host refuses a version or serial that does not rise).

Run from the repository root with the host's venv (it uses `cryptography`, already there).
The private key never leaves the machine that signs; the host only ever sees the public key.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import json
import os
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

ROOT = Path(__file__).resolve().parent.parent


def public_key_b64(key: Ed25519PrivateKey) -> str:
    raw = key.public_key().public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    return base64.b64encode(raw).decode()


def load_key(path: str) -> Ed25519PrivateKey:
    key = serialization.load_pem_private_key(Path(path).read_bytes(), password=None)
    if not isinstance(key, Ed25519PrivateKey):
        sys.exit(f"{path} is not an Ed25519 private key")
    return key


def keygen(path: str) -> None:
    key = Ed25519PrivateKey.generate()
    pem = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as fh:
        fh.write(pem)
    sys.stdout.write(public_key_b64(key) + "\n")


def sign_payload(key: Ed25519PrivateKey, payload: dict) -> bytes:
    raw = json.dumps(payload, sort_keys=True).encode()
    document = {
        "payload": base64.b64encode(raw).decode(),
        "signature": base64.b64encode(key.sign(raw)).decode(),
    }
    return json.dumps(document).encode()


def build(key_path: str, version: str, serial: int, base_url: str, out: Path, rev: str) -> Path:
    key = load_key(key_path)
    commit = subprocess.run(
        ["git", "-C", str(ROOT), "rev-parse", "--verify", f"{rev}^{{commit}}"],
        check=True, capture_output=True, text=True,
    ).stdout.strip()  # fmt: skip
    out.mkdir(parents=True, exist_ok=True)
    name = f"host-{version}.tar.gz"
    archive = out / name
    subprocess.run(
        ["git", "-C", str(ROOT), "archive", "--format=tar.gz", f"--prefix=host-{version}/",
         "-o", str(archive.resolve()), commit],
        check=True,
    )  # fmt: skip
    data = archive.read_bytes()
    payload = {
        "version": version,
        "channel": "canary" if "canary" in version else "stable",
        "serial": serial,
        "published_at": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "notes_url": "",
        "artifacts": {
            "source": {
                "commit": commit,
                "url": base_url.rstrip("/") + "/" + name,
                "sha256": hashlib.sha256(data).hexdigest(),
                "size": len(data),
            }
        },
    }
    manifest = out / "manifest.json"
    manifest.write_bytes(sign_payload(key, payload))
    return manifest


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    kg = sub.add_parser("keygen")
    kg.add_argument("key")
    bd = sub.add_parser("build")
    for name in ("key", "version"):
        bd.add_argument(name)
    bd.add_argument("serial", type=int)
    bd.add_argument("base_url")
    bd.add_argument("out", type=Path)
    bd.add_argument("--commit", default="HEAD")
    args = parser.parse_args(argv)
    if args.command == "keygen":
        keygen(args.key)
        return
    if args.serial <= 0:
        sys.exit("serial must be a positive integer")
    manifest = build(args.key, args.version, args.serial, args.base_url, args.out, args.commit)
    sys.stdout.write(f"wrote {manifest} and its archive; publish both unchanged\n")


if __name__ == "__main__":
    main(sys.argv[1:])
