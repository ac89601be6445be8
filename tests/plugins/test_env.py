"""The plugin environment and the wheel builder, with a real venv and a real pip install."""

import subprocess
import sys
import textwrap
import zipfile

import pytest

from plugins import env, wheel


def _source(tmp_path, name="host-plugin-demo", ep_id="demo", version="0.1.0"):
    src = tmp_path / f"src-{name}-{version}"
    (src / "demo_pkg").mkdir(parents=True)
    (src / "pyproject.toml").write_text(
        textwrap.dedent(
            f"""
            [project]
            name = "{name}"
            version = "{version}"
            description = "a test plugin"
            [project.entry-points."hostmgmt.plugins"]
            {ep_id} = "demo_pkg:main"
            """
        )
    )
    (src / "demo_pkg" / "__init__.py").write_text(
        "import os, sys\ndef main():\n    print('demo says', os.environ.get('DEMO_WORD'))\n"
        "    return 3\n"
    )
    (src / "demo_pkg" / "__pycache__").mkdir()
    (src / "demo_pkg" / "__pycache__" / "x.pyc").write_bytes(b"junk")
    return src


def test_wheel_is_reproducible_and_complete(tmp_path):
    src = _source(tmp_path)
    first = wheel.build_wheel(src, tmp_path / "a")
    second = wheel.build_wheel(src, tmp_path / "b")
    assert first.name == "host_plugin_demo-0.1.0-py3-none-any.whl"
    assert first.read_bytes() == second.read_bytes()
    names = zipfile.ZipFile(first).namelist()
    assert "demo_pkg/__init__.py" in names
    assert not any("__pycache__" in n for n in names)
    info = "host_plugin_demo-0.1.0.dist-info/"
    assert {info + "METADATA", info + "WHEEL", info + "RECORD", info + "entry_points.txt"} <= set(
        names
    )


def test_wheel_refuses_a_name_out_of_shape(tmp_path):
    with pytest.raises(ValueError):
        wheel.build_wheel(_source(tmp_path, name="bad name"), tmp_path / "out")


@pytest.mark.timeout(180)
def test_installed_plugin_is_listed_and_launched(tmp_path, monkeypatch):
    monkeypatch.setenv("HOST_STATE_DIR", str(tmp_path / "state"))
    assert env.installed() == []
    python = env.ensure_env()
    built = [
        wheel.build_wheel(_source(tmp_path), tmp_path / "out"),
        # Not a host plugin by name: the group entry is ignored.
        wheel.build_wheel(_source(tmp_path, name="other-thing", ep_id="other"), tmp_path / "out"),
    ]
    pip = [sys.executable, "-m", "pip", "--python", str(python), "install", "-q", "--no-index"]
    subprocess.run([*pip, *map(str, built)], check=True, capture_output=True, timeout=120)
    assert env.installed() == [
        env.InstalledPlugin("demo", "host-plugin-demo", "0.1.0", "demo_pkg:main")
    ]
    done = subprocess.run(
        env.launch_argv("demo"), capture_output=True, text=True, env={"DEMO_WORD": "hi"}
    )
    assert done.returncode == 3
    assert done.stdout.strip() == "demo says hi"
    missing = subprocess.run(env.launch_argv("nope"), capture_output=True, text=True)
    assert missing.returncode == 1 and "no plugin entry point named nope" in missing.stderr
    with pytest.raises(ValueError):
        env.launch_argv("../x")
