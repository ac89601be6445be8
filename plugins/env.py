"""The plugin environment: a virtual environment of its own under the state directory, so a
plugin's dependencies can never replace the host's pinned ones, and removing every plugin is
removing one directory.

The contract a plugin distribution follows (docs/plugins.md):
- its distribution name starts with `host-plugin-` (`DIST_PREFIX`);
- it declares exactly one entry point in the group `hostmgmt.plugins` (`ENTRY_POINT_GROUP`) whose
  name is the plugin id (`[a-z][a-z0-9-]*`, at most 64 characters) and whose object is a callable
  taking no arguments; the runner calls it in a process of its own (`launch_argv`);
- no other distribution in the environment declares that id.

Why the host never starts the environment's interpreter to list, install or remove: any `.pth`
file in its site-packages runs at that interpreter's start-up (`-I` does not stop it), so
starting it is running plugin code. Listing reads the `*.dist-info` files with the host's own
Python (`scan`), installing runs the host's pip with `--prefix` (plugins/store/install.py), and
removing follows the distribution's RECORD (`remove_dist`). Only `launch_argv`, which the runner
starts while the runtime is on, runs the environment's interpreter.

Nothing here imports Django: the supervisor, Celery tasks and the tests use it alike.
"""

from __future__ import annotations

import csv
import io
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from importlib.metadata import PathDistribution
from pathlib import Path

from access.plugin_tokens import PLUGIN_ID
from common import statedir
from common.env import without_secrets

ENTRY_POINT_GROUP = "hostmgmt.plugins"
DIST_PREFIX = "host-plugin-"
DIST_NAME = re.compile(r"host-plugin-[a-z0-9][a-z0-9-]{0,58}")
# The host's own settings: a process the host starts for plugin code gets none of them (the same
# rule as the runner's; secret-named variables go by common.env.without_secrets).
HOST_ONLY_VARS = ("HOST_", "DJANGO_", "REDIS_URL", "CELERY", "SESSION_MANAGER", "PYTHON", "PIP_")


@dataclass(frozen=True)
class InstalledPlugin:
    """One entry point of the group found in the plugin environment."""

    plugin_id: str
    pkg: str  # the distribution's normalized name, e.g. host-plugin-desktop-folder
    version: str
    target: str  # "module:callable"


@dataclass(frozen=True)
class Declaration:
    """One `hostmgmt.plugins` entry point, whoever declares it (any distribution name)."""

    plugin_id: str
    pkg: str
    version: str
    target: str


@dataclass
class Scan:
    """What the environment's files say: the runnable plugins, every package named
    `host-plugin-*` with its version, and the ids declared more than once (never run)."""

    plugins: list[InstalledPlugin] = field(default_factory=list)
    packages: dict[str, str] = field(default_factory=dict)
    conflicts: dict[str, list[Declaration]] = field(default_factory=dict)


def env_dir() -> Path:
    return statedir.state_path("plugins", "env")


def env_python() -> Path:
    return env_dir() / "bin" / "python"


def site_packages() -> Path:
    """The environment's site-packages: the venv scheme of the host's own Python version (the
    environment is made by the host's interpreter, `ensure_env`)."""
    version = f"python{sys.version_info.major}.{sys.version_info.minor}"
    return env_dir() / "lib" / version / "site-packages"


def ensure_env() -> Path:
    """Create the environment on first use (no pip inside it: the host's pip installs into it,
    so the environment holds only plugin code)."""
    python = env_python()
    if not python.exists():
        env_dir().parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        subprocess.run(
            [sys.executable, "-m", "venv", "--without-pip", str(env_dir())],
            check=True,
            capture_output=True,
            timeout=120,
        )
    if not site_packages().is_dir():
        raise RuntimeError(
            f"the plugin environment {env_dir()} was not made by this host's Python "
            f"{sys.version_info.major}.{sys.version_info.minor}; remove it and reinstall plugins"
        )
    return python


def child_env() -> dict[str, str]:
    """The environment of a process the host runs on the plugin environment (pip): the host's,
    without secret-named variables and without the host's own settings."""
    return {
        k: v
        for k, v in without_secrets().items()
        if not k.startswith(HOST_ONLY_VARS) and k != "PWD"
    }


# Runs inside the plugin environment (argv: group, id): loads that entry point and calls it,
# unless no distribution or more than one declares the id (every distribution counts, whatever
# its name: the one loaded must be the only claimant).
_LAUNCH_SCRIPT = """
import sys
from importlib.metadata import distributions
group, name = sys.argv[1], sys.argv[2]
found = [(d.metadata.get("Name") or "?", ep) for d in distributions()
         for ep in d.entry_points if ep.group == group and ep.name == name]
if not found:
    sys.exit("no plugin entry point named " + name)
if len(found) > 1:
    sys.exit("plugin id %s is declared by %d distributions (%s): none of them is started"
             % (name, len(found), ", ".join(sorted(n for n, _ in found))))
sys.exit(found[0][1].load()())
"""


def normalize_dist(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _dist_infos() -> list[Path]:
    """The `*.dist-info` folders of site-packages (symbolic links are not followed)."""
    site = site_packages()
    if not site.is_dir():
        return []
    return sorted(
        p
        for p in site.iterdir()
        if p.name.endswith(".dist-info") and p.is_dir() and not p.is_symlink()
    )


def _read(info: Path) -> tuple[str, str, list[tuple[str, str]]] | None:
    """(normalized name, version, [(id, target)] of the group) from one dist-info's files."""
    dist = PathDistribution(info)
    try:
        name = normalize_dist(str(dist.metadata.get("Name") or ""))
        version = str(dist.metadata.get("Version") or "")
        eps = [(ep.name, ep.value) for ep in dist.entry_points if ep.group == ENTRY_POINT_GROUP]
    except (OSError, ValueError, UnicodeDecodeError):
        return None
    return (name, version, eps) if name else None


def scan() -> Scan:
    """Read the environment's distributions from their files (nothing of the environment runs)."""
    out = Scan()
    declared: dict[str, list[Declaration]] = {}
    for info in _dist_infos():
        read = _read(info)
        if read is None:
            continue
        name, version, eps = read
        if DIST_NAME.fullmatch(name):
            out.packages[name] = version
        for plugin_id, target in eps:
            declared.setdefault(plugin_id, []).append(Declaration(plugin_id, name, version, target))
    for plugin_id, decls in sorted(declared.items()):
        if len(decls) > 1:
            out.conflicts[plugin_id] = decls
            continue
        d = decls[0]
        if DIST_NAME.fullmatch(d.pkg) and PLUGIN_ID.fullmatch(plugin_id):
            out.plugins.append(InstalledPlugin(plugin_id, d.pkg, d.version, d.target))
    return out


def installed() -> list[InstalledPlugin]:
    """The plugins installed in the environment, sorted by id; only distributions named
    `host-plugin-*` with a well-formed id count (anything else in the group is ignored), and an
    id two distributions declare is left out (`conflicts`): neither runs."""
    return scan().plugins


def conflicts() -> dict[str, list[Declaration]]:
    """Plugin ids declared by more than one distribution: none of them is run."""
    return scan().conflicts


def installed_packages() -> dict[str, str]:
    """{pkg: version} of every `host-plugin-*` distribution in the environment."""
    return scan().packages


def launch_argv(plugin_id: str) -> list[str]:
    """The command line the runner starts for one plugin (`-I`: the host's environment
    variables like PYTHONPATH do not leak into the plugin's interpreter)."""
    if not PLUGIN_ID.fullmatch(plugin_id):
        raise ValueError("bad plugin id")
    return [str(env_python()), "-I", "-c", _LAUNCH_SCRIPT, ENTRY_POINT_GROUP, plugin_id]


# -- removing a distribution -----------------------------------------------------------------
def _inside(path: str, root: str) -> bool:
    return os.path.commonpath([path, root]) == root


def _record_paths(info: Path) -> list[str]:
    try:
        text = (info / "RECORD").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return []
    return [row[0] for row in csv.reader(io.StringIO(text)) if row and row[0]]


def remove_dist(pkg: str) -> list[str]:
    """Remove every distribution named `pkg` as pip would (the files its RECORD lists, their
    byte-code caches, the folders left empty, the dist-info), without starting the environment's
    interpreter. A RECORD line that leads out of the environment, to its interpreter or to
    pyvenv.cfg is skipped. Returns the names of the removed dist-info folders."""
    root = os.path.realpath(env_dir())
    site = os.path.realpath(site_packages())
    keep = {os.path.join(root, "pyvenv.cfg"), site}
    removed = []
    for info in _dist_infos():
        read = _read(info)
        if read is None or read[0] != pkg:
            continue
        emptied: set[str] = set()
        for rel in _record_paths(info):
            if os.path.isabs(rel):
                continue
            parent = os.path.realpath(os.path.dirname(os.path.join(site, rel)))
            target = os.path.join(parent, os.path.basename(rel))
            if not _inside(parent, root) or target in keep:
                continue
            if parent == os.path.join(root, "bin") and os.path.basename(rel).startswith("python"):
                continue
            if os.path.isfile(target) or os.path.islink(target):
                os.unlink(target)
                emptied.add(parent)
            if target.endswith(".py"):
                cache = os.path.join(parent, "__pycache__")
                stem = os.path.basename(target)[:-3] + "."
                if os.path.isdir(cache):
                    for name in os.listdir(cache):
                        if name.startswith(stem) and name.endswith(".pyc"):
                            os.unlink(os.path.join(cache, name))
                    emptied.add(cache)
        shutil.rmtree(info)
        removed.append(info.name)
        for folder in sorted(emptied, key=len, reverse=True):
            while _inside(folder, site) and folder != site:
                try:
                    os.rmdir(folder)
                except OSError:
                    break
                folder = os.path.dirname(folder)
    return removed
