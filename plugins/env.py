"""The plugin environment: a virtual environment of its own under the state directory, so a
plugin's dependencies can never replace the host's pinned ones, and removing every plugin is
removing one directory.

The contract a plugin distribution follows (docs/plugins.md):
- its distribution name starts with `host-plugin-` (`DIST_PREFIX`);
- it declares one entry point in the group `hostmgmt.plugins` (`ENTRY_POINT_GROUP`) whose name is
  the plugin id (`[a-z][a-z0-9-]*`, at most 64 characters) and whose object is a callable taking no
  arguments; the runner calls it in a process of its own (`launch_argv`).

Nothing here imports Django: the supervisor, Celery tasks and the tests use it alike.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from hostmgmt.lib import statedir

ENTRY_POINT_GROUP = "hostmgmt.plugins"
DIST_PREFIX = "host-plugin-"
PLUGIN_ID = re.compile(r"[a-z][a-z0-9-]{0,63}")
DIST_NAME = re.compile(r"host-plugin-[a-z0-9][a-z0-9-]{0,58}")


@dataclass(frozen=True)
class InstalledPlugin:
    """One entry point of the group found in the plugin environment."""

    plugin_id: str
    pkg: str  # the distribution's normalized name, e.g. host-plugin-desktop-folder
    version: str
    target: str  # "module:callable"


def env_dir() -> Path:
    return statedir.state_path("plugins", "env")


def env_python() -> Path:
    return env_dir() / "bin" / "python"


def ensure_env() -> Path:
    """Create the environment on first use (no pip inside it: the host's pip installs into it
    with `--python`, so the environment holds only plugin code)."""
    python = env_python()
    if not python.exists():
        env_dir().parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        subprocess.run(
            [sys.executable, "-m", "venv", "--without-pip", str(env_dir())],
            check=True,
            capture_output=True,
            timeout=120,
        )
    return python


# Runs inside the plugin environment (argv: group): lists its entry points as JSON on stdout.
_LIST_SCRIPT = """
import json, sys
from importlib.metadata import entry_points
out = []
for ep in entry_points(group=sys.argv[1]):
    dist = ep.dist
    out.append({"id": ep.name, "pkg": dist.metadata["Name"] if dist else "",
                "version": dist.version if dist else "", "target": ep.value})
print(json.dumps(out))
"""

# Runs inside the plugin environment (argv: group, id): loads that entry point and calls it.
_LAUNCH_SCRIPT = """
import sys
from importlib.metadata import entry_points
eps = [ep for ep in entry_points(group=sys.argv[1]) if ep.name == sys.argv[2]]
if not eps:
    sys.exit("no plugin entry point named " + sys.argv[2])
sys.exit(eps[0].load()())
"""


def normalize_dist(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def installed() -> list[InstalledPlugin]:
    """The plugins installed in the environment, sorted by id; only distributions named
    `host-plugin-*` with a well-formed id count (anything else in the group is ignored)."""
    python = env_python()
    if not python.exists():
        return []
    done = subprocess.run(
        [str(python), "-I", "-c", _LIST_SCRIPT, ENTRY_POINT_GROUP],
        capture_output=True,
        text=True,
        timeout=60,
        env={"PATH": os.environ.get("PATH", "/usr/bin:/bin")},
    )
    if done.returncode != 0:
        raise RuntimeError(f"listing plugins failed: {done.stderr.strip()[-500:]}")
    found = []
    for row in json.loads(done.stdout or "[]"):
        pkg = normalize_dist(str(row.get("pkg", "")))
        pid = str(row.get("id", ""))
        if DIST_NAME.fullmatch(pkg) and PLUGIN_ID.fullmatch(pid):
            found.append(InstalledPlugin(pid, pkg, str(row.get("version", "")), str(row["target"])))
    return sorted(found, key=lambda p: p.plugin_id)


def launch_argv(plugin_id: str) -> list[str]:
    """The command line the runner starts for one plugin (`-I`: the host's environment
    variables like PYTHONPATH do not leak into the plugin's interpreter)."""
    if not PLUGIN_ID.fullmatch(plugin_id):
        raise ValueError("bad plugin id")
    return [str(env_python()), "-I", "-c", _LAUNCH_SCRIPT, ENTRY_POINT_GROUP, plugin_id]
