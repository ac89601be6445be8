"""Builds a pure-Python plugin wheel from a source folder with the standard library only.

Why: the host's environment carries no build backend (setuptools, wheel), a plugin author's
machine may not either, and the store pins a wheel by its sha256, so the same source must give the
same bytes every time (fixed timestamps, sorted entries). Only what a plugin needs is supported:
`pyproject.toml` with `[project]` `name`, `version`, optional `description`, `dependencies` and
`[project.entry-points."hostmgmt.plugins"]`; the packages are the folder's top-level directories
holding an `__init__.py`.
"""

from __future__ import annotations

import base64
import hashlib
import re
import tomllib
import zipfile
from pathlib import Path

_EPOCH = (1980, 1, 1, 0, 0, 0)
_SKIP = re.compile(r"(^|/)(__pycache__|\.[^/]*)(/|$)|\.py[co]$")


def _record_hash(data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=")
    return "sha256=" + digest.decode()


def build_wheel(src: Path, out_dir: Path) -> Path:
    """Write `<name>-<version>-py3-none-any.whl` into `out_dir` and return its path."""
    project = tomllib.loads((src / "pyproject.toml").read_text())["project"]
    name = str(project["name"])
    version = str(project["version"])
    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]*", name) or not re.fullmatch(
        r"[0-9A-Za-z.+!-]+", version
    ):
        raise ValueError("project name or version out of shape")
    stem = f"{re.sub(r'[-_.]+', '_', name)}-{version}"
    dist_info = f"{stem}.dist-info"

    files: dict[str, bytes] = {}
    for package in sorted(p for p in src.iterdir() if (p / "__init__.py").is_file()):
        for path in sorted(package.rglob("*")):
            rel = path.relative_to(src).as_posix()
            if path.is_file() and not _SKIP.search(rel):
                files[rel] = path.read_bytes()

    meta = ["Metadata-Version: 2.1", f"Name: {name}", f"Version: {version}"]
    if project.get("description"):
        meta.append(f"Summary: {project['description']}")
    meta += [f"Requires-Dist: {dep}" for dep in project.get("dependencies", [])]
    files[f"{dist_info}/METADATA"] = ("\n".join(meta) + "\n").encode()
    files[f"{dist_info}/WHEEL"] = (
        b"Wheel-Version: 1.0\nGenerator: hostmgmt-plugins\n"
        b"Root-Is-Purelib: true\nTag: py3-none-any\n"
    )
    groups = project.get("entry-points", {})
    if groups:
        lines = []
        for group in sorted(groups):
            lines.append(f"[{group}]")
            lines += [f"{key} = {value}" for key, value in sorted(groups[group].items())]
            lines.append("")
        files[f"{dist_info}/entry_points.txt"] = "\n".join(lines).encode()
    record = [f"{path},{_record_hash(data)},{len(data)}" for path, data in files.items()]
    record.append(f"{dist_info}/RECORD,,")
    files[f"{dist_info}/RECORD"] = ("\n".join(record) + "\n").encode()

    out_dir.mkdir(parents=True, exist_ok=True)
    target = out_dir / f"{stem}-py3-none-any.whl"
    with zipfile.ZipFile(target, "w", zipfile.ZIP_DEFLATED) as archive:
        for path, data in files.items():
            info = zipfile.ZipInfo(path, date_time=_EPOCH)
            info.external_attr = 0o644 << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            archive.writestr(info, data)
    return target
