"""The systemd user unit that runs the host inside the operator's graphical session.

A user unit, not a system one: the host streams the desktop of the person logged in, so it runs
as that user, starts with their graphical session (`graphical-session.target`, which desktops
reach after exporting `DISPLAY` / `WAYLAND_DISPLAY` to the user manager) and stops with it.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from common.files import atomic_write

UNIT_NAME = "hostmgmt.service"
# The supervisor gives host.stopping hooks up to 15 s, then stops its children.
STOP_TIMEOUT_S = 45


class UnitError(ValueError):
    pass


def unit_path(home: Path) -> Path:
    config = os.environ.get("XDG_CONFIG_HOME") or str(home / ".config")
    return Path(config) / "systemd" / "user" / UNIT_NAME


def _printable(value: str) -> str:
    if not value.isprintable():
        raise UnitError(f"path {value!r} holds characters a unit file cannot carry")
    return value


def _quote(value: str) -> str:
    """A double-quoted systemd value: `\\`, `"` and the specifier `%` escaped. For
    Environment=, which expands no `$`."""
    escaped = _printable(value).replace("\\", "\\\\").replace('"', '\\"').replace("%", "%%")
    return f'"{escaped}"'


def _argument(value: str) -> str:
    """One ExecStart= argument: quoted as above, and `$` doubled (ExecStart= expands `$NAME`)."""
    return _quote(value).replace("$", "$$")


def _executable(value: str) -> str:
    """ExecStart='s program: systemd takes no `$`, `"` or `\\` in it, escaped or not
    ("Executable name contains special characters"), so such a path is refused."""
    bad = sorted({c for c in _printable(value) if c in '$"\\'})
    if bad:
        raise UnitError(
            f"the Python path {value!r} holds {' '.join(bad)}, which systemd does not accept in "
            "a unit's program path; install the checkout under a path without them"
        )
    return _quote(value)


def _bare_path(value: str) -> str:
    """A path for a key systemd reads unquoted (WorkingDirectory=): quotes would become part of
    the path ("path is not absolute ... unit will not be started"). Spaces, quotes and
    backslashes are literal there; `%` is a specifier (`%%`); trailing blanks are stripped and
    a trailing backslash continues the line, so those are refused."""
    if not _printable(value).startswith("/"):
        raise UnitError(f"path {value!r} is not absolute")
    if value != value.rstrip() or value.endswith("\\"):
        raise UnitError(f"path {value!r} ends with a blank or a backslash, which systemd drops")
    return value.replace("%", "%%")


def _env_line(name: str, value: str) -> str:
    return f"Environment={_quote(f'{name}={value}')}"


def render(python: str, manage_py: str, workdir: str, env: dict[str, str] | None = None) -> str:
    """The unit text; `env` holds only what the operator set explicitly (state dir, ports)."""
    lines = [
        "# Written by `manage.py install_user_service`; rerun it after moving the checkout.",
        "[Unit]",
        "Description=Game-streaming host (hostmgmt)",
        "PartOf=graphical-session.target",
        "After=graphical-session.target",
        "",
        "[Service]",
        "Type=simple",
        f"WorkingDirectory={_bare_path(workdir)}",
        f"ExecStart={_executable(python)} {_argument(manage_py)} runhost",
        *(_env_line(k, v) for k, v in sorted((env or {}).items())),
        "Restart=on-failure",
        "RestartSec=5",
        # SIGTERM to the supervisor only: it stops its children in order after the hooks.
        "KillMode=mixed",
        f"TimeoutStopSec={STOP_TIMEOUT_S}",
        "",
        "[Install]",
        "WantedBy=graphical-session.target",
        "",
    ]
    return "\n".join(lines)


# Settings carried into the unit when exported for this install. Never a secret (REDIS_URL may
# hold a password, tokens have their files): `systemctl --user show` prints Environment=.
CARRIED_ENV = ("HOST_STATE_DIR", "HOST_PORT", "HOST_BIND", "HOST_LOG_LEVEL")


def install(home: Path, repo: Path, environ: dict[str, str]) -> Path:
    """Write the unit atomically for this checkout's venv; returns its path."""
    env = {k: environ[k] for k in CARRIED_ENV if environ.get(k)}
    text = render(sys.executable, str(repo / "manage.py"), str(repo), env)
    path = unit_path(home)
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(path, text, mode=0o644)
    return path
