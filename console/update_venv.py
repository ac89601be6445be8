"""The staged tree's own `.venv` (docs/updates.md, "Apply", step `environment`).

Each staged tree gets a venv of its own, so a later `make run` in the checkout (or the next
update) never changes the environment of a tree that runs, and a rollback needs no network: the
previous tree keeps its venv untouched.

- Same `requirements.txt` bytes: `python -m venv --without-pip`, then every file of the running
  venv's site-packages hard-linked into the new one (copied when the two are on different file
  systems). Hard links are safe because nothing modifies an installed file in place: pip
  unlinks a file before writing its replacement and uninstalls by renaming and removing,
  Python writes bytecode to a temporary file it renames. A change in either venv replaces its
  own directory entry; the other keeps the old inode. The venv's `bin/` holds only python and
  `activate`: the running venv's console scripts name its python in their shebang, and the host
  starts everything as `.venv/bin/python manage.py` or `python -m` (supervisor/launcher.py,
  supervisor/main.py), never through them.
- Changed `requirements.txt`: the same venv, then `pip wheel -r requirements.txt` into the wheel
  cache `<state>/updates/wheels/` (the only step that uses the network), then `pip install
  --no-index --find-links <cache> -r requirements.txt` into the new venv.
"""

from __future__ import annotations

import errno
import os
import shutil
from pathlib import Path

from console import update_run

VENV_TIMEOUT_S = 120.0
PIP_TIMEOUT_S = float(os.environ.get("HOST_UPDATE_PIP_TIMEOUT_S", "900"))


class VenvError(RuntimeError):
    """The new venv could not be made; the message says which step and why."""


def site_packages(venv: Path) -> Path:
    found = sorted(venv.glob("lib/python*/site-packages"))
    if len(found) != 1:
        raise VenvError(f"{venv} has {len(found)} site-packages folders, not one")
    return found[0]


def _link_or_copy(src: Path, dst: Path, linking: list[bool]) -> None:
    if linking[0]:
        try:
            os.link(src, dst)
            return
        except OSError as exc:
            if exc.errno not in (errno.EXDEV, errno.EPERM, errno.EMLINK):
                raise
            linking[0] = False  # another file system (or no links there): copies from here on
    shutil.copy2(src, dst)


def link_tree(src: Path, dst: Path) -> bool:
    """Every file under `src` into `dst` (folders made, symlinks kept as links): hard links
    where the file system allows, copies otherwise. True when all were linked."""
    linking = [True]
    for folder, dirs, files in os.walk(src):
        here = Path(folder)
        target = dst / here.relative_to(src)
        target.mkdir(exist_ok=True)
        for name in [*dirs, *files]:
            if (here / name).is_symlink():
                os.symlink(os.readlink(here / name), target / name)
            elif name in files:
                _link_or_copy(here / name, target / name, linking)
        dirs[:] = [d for d in dirs if not (here / d).is_symlink()]
    return linking[0]


def clone(running: Path, dest: Path, log: Path) -> str:
    """A venv at `dest` with the packages of the `running` venv; no network. Says how."""
    python = running / "bin" / "python"
    try:
        code = update_run.run(
            [str(python), "-m", "venv", "--without-pip", str(dest)],
            cwd=dest.parent, env=update_run.clean_env(), timeout_s=VENV_TIMEOUT_S, output=log,
        )  # fmt: skip
    except update_run.Timeout as exc:
        raise VenvError(f"python -m venv {exc}") from None
    if code != 0:
        raise VenvError(f"python -m venv exited with {code}:\n{update_run.tail(log)}")
    new = site_packages(dest)
    shutil.rmtree(new)
    linked = link_tree(site_packages(running.resolve()), new)
    return "site-packages hard-linked from the running venv" if linked else (
        "site-packages copied from the running venv (another file system)"
    )  # fmt: skip


def _pip(dest: Path, name: str, args: list[str], log: Path) -> None:
    argv = [str(dest / "bin" / "python"), "-m", "pip", "--disable-pip-version-check",
            "--no-input", *args]  # fmt: skip
    try:
        code = update_run.run(
            argv, cwd=dest.parent, env=update_run.clean_env(PIP_NO_INPUT="1"),
            timeout_s=PIP_TIMEOUT_S, output=log,
        )  # fmt: skip
    except update_run.Timeout as exc:
        raise VenvError(f"{name} {exc}") from None
    if code != 0:
        raise VenvError(f"{name} exited with {code}:\n{update_run.tail(log)}")


def fetch_wheels(dest: Path, requirements: Path, cache: Path, log: Path) -> None:
    """Wheels of every requirement into `cache` (the network step; wheels already there are
    taken from it)."""
    cache.mkdir(mode=0o700, parents=True, exist_ok=True)
    _pip(dest, "pip wheel", ["wheel", "--find-links", str(cache), "-w", str(cache),
                             "-r", str(requirements)], log)  # fmt: skip


def install_from_cache(dest: Path, requirements: Path, cache: Path, log: Path) -> None:
    """The requirements into the venv at `dest` from `cache` alone (no index, no network)."""
    _pip(dest, "pip install", ["install", "--no-index", "--find-links", str(cache),
                               "-r", str(requirements)], log)  # fmt: skip


def build(root: Path, staged: Path, cache: Path, log: Path) -> str:
    """The staged tree's `.venv`, from the running checkout's (`root`); what was done, for the
    journal. VenvError when it fails (the partial venv removed)."""
    dest = staged / ".venv"
    shutil.rmtree(dest, ignore_errors=True)
    try:
        how = clone(root / ".venv", dest, log)
        wanted = staged / "requirements.txt"
        if wanted.read_bytes() != (root / "requirements.txt").read_bytes():
            fetch_wheels(dest, wanted, cache, log)
            install_from_cache(dest, wanted, cache, log)
            how += "; the changed requirements installed from the wheel cache"
        return how
    except OSError as exc:
        shutil.rmtree(dest, ignore_errors=True)
        raise VenvError(f"{exc.strerror or exc}") from None
    except VenvError:
        shutil.rmtree(dest, ignore_errors=True)
        raise
