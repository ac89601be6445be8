#!/usr/bin/env python3
"""Make a store signing key and sign a plugin catalog (docs/plugins.md, "Signing a catalog").

    python scripts/sign_catalog.py keygen KEY.pem        # prints the source's public_key
    python scripts/sign_catalog.py entry WHEEL URL ID     # prints a catalog entry for WHEEL
    python scripts/sign_catalog.py sign KEY.pem catalog.json   # writes catalog.json.sig

A signed catalog carries `serial` (raise it with every publication: the host refuses a serial
lower than, or equal with other bytes to, the last it accepted) and `expires` (ISO 8601 with a
zone: the host withholds its entries after that time, so re-sign before it).

Run from the repository root with the host's venv (it uses `cryptography`, already there).
The private key never leaves the machine that signs; the host only ever sees the public key.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from plugins.store import catalog as store_catalog
from plugins.store import signing


def _say(text: str) -> None:
    sys.stdout.write(text + "\n")


def keygen(path: str) -> None:
    key = signing.new_private_key()
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as fh:
        fh.write(signing.private_key_pem(key))
    _say(signing.format_public_key(key.public_key()))


def entry(wheel: str, url: str, plugin_id: str) -> None:
    name = Path(wheel).name.split("-")
    _say(json.dumps({
        "id": plugin_id, "pkg": name[0].replace("_", "-").lower(), "title": plugin_id,
        "description": "", "author": "", "version": name[1], "platforms": ["linux"],
        "wheel": {"url": url, "sha256": hashlib.sha256(Path(wheel).read_bytes()).hexdigest()},
    }, indent=2))  # fmt: skip


def sign(key_path: str, catalog: str) -> None:
    key = signing.load_private_key(Path(key_path).read_bytes())
    data = Path(catalog).read_bytes()
    doc = json.loads(data)  # refuse to sign something the host would refuse to read
    if doc.get("format") != 1 or not isinstance(doc.get("plugins"), list):
        sys.exit('catalog must be {"format": 1, "plugins": [...]}')
    try:
        store_catalog.validity(data)
    except store_catalog.BadCatalog as exc:
        sys.exit(str(exc))
    Path(catalog + ".sig").write_bytes(signing.sign(key, data))
    _say(f"wrote {catalog}.sig; publish both files unchanged, side by side")


def main(argv: list[str]) -> None:
    commands = {"keygen": (keygen, 1), "entry": (entry, 3), "sign": (sign, 2)}
    if not argv or argv[0] not in commands or len(argv) - 1 != commands[argv[0]][1]:
        sys.exit(__doc__)
    commands[argv[0]][0](*argv[1:])


if __name__ == "__main__":
    main(sys.argv[1:])
