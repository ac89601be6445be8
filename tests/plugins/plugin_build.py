"""Build a one-module plugin wheel and install it into the state dir's plugin environment, as
the store would (the host's pip with `--python`, no index)."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

from plugins import env, wheel


def build(tmp_path: Path, plugin_id: str, code: str) -> Path:
    mod = "p_" + plugin_id.replace("-", "_")
    src = tmp_path / f"src-{plugin_id}"
    (src / mod).mkdir(parents=True)
    (src / "pyproject.toml").write_text(
        textwrap.dedent(
            f"""
            [project]
            name = "host-plugin-{plugin_id}"
            version = "1.0"
            [project.entry-points."hostmgmt.plugins"]
            {plugin_id} = "{mod}:main"
            """
        )
    )
    (src / mod / "__init__.py").write_text(code)
    return wheel.build_wheel(src, tmp_path / "out")


def install(tmp_path: Path, plugins: dict[str, str]) -> None:
    """Into the plugin environment of the current HOST_STATE_DIR."""
    python = env.ensure_env()
    wheels = [str(build(tmp_path, pid, code)) for pid, code in plugins.items()]
    pip = [sys.executable, "-m", "pip", "--python", str(python), "install", "-q", "--no-index"]
    subprocess.run([*pip, *wheels], check=True, capture_output=True, timeout=170)
