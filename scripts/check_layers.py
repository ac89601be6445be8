"""`make lint`: every Python package of the repository is in the package layers contract.

import-linter checks the layers it is given; this checks that it is given every package, so a
new package cannot sit outside the layering (and outside its no-cycle guarantee) unnoticed.
"""

from __future__ import annotations

import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
NOT_PRODUCT = {"tests", "bench", "scripts"}  # code that runs the product, not part of it
CONTRACT = "Packages: the wiring, then each package over the ones it builds on"


def packages() -> set[str]:
    return {
        p.parent.name
        for p in ROOT.glob("*/__init__.py")
        if p.parent.name not in NOT_PRODUCT and not p.parent.name.startswith(".")
    }


def layered(config: dict) -> set[str]:
    contract = next(c for c in config["contracts"] if c["name"] == CONTRACT)
    return {name.strip() for layer in contract["layers"] for name in layer.split("|")}


def main() -> int:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
    found, roots, layers = packages(), set(config["root_packages"]), layered(config)
    problems = [f"{p}: not in root_packages" for p in sorted(found - roots)]
    problems += [f"{p}: in no layer of {CONTRACT!r}" for p in sorted(found - layers)]
    problems += [f"{p}: layered but no such package" for p in sorted(layers - found)]
    for line in problems:
        sys.stderr.write(f"check_layers: {line}\n")
    if not problems:
        sys.stdout.write(f"check_layers: {len(found)} packages, each in one layer\n")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
