"""A command an update apply runs before the switch (the release's migrations, pip): bounded in
time, its output kept in a file, of which only the last lines come back for the journal."""

from __future__ import annotations

import os
import signal
import subprocess
from pathlib import Path

from console import logfile

TAIL_LINES = 12
TAIL_BYTES = 4096


class Timeout(RuntimeError):
    """The command ran past its time; it and its process group were killed."""


def tail(path: Path) -> str:
    """The last lines of the file's end (a bounded read, whatever its size)."""
    text = logfile.read_tail(path, TAIL_BYTES).decode("utf-8", "replace")
    return "\n".join(text.strip().splitlines()[-TAIL_LINES:])


def run(argv: list[str], *, cwd: Path, env: dict[str, str], timeout_s: float, output: Path) -> int:
    """The command's exit status; its stdout and stderr go to `output`. Timeout after
    `timeout_s`, with its whole process group killed and reaped."""
    with open(output, "ab") as out:
        proc = subprocess.Popen(
            argv, cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=out,
            stderr=subprocess.STDOUT, start_new_session=True,
        )  # fmt: skip
        try:
            return proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            raise Timeout(f"did not finish in {timeout_s:.0f} s") from None


def clean_env(**extra: str) -> dict[str, str]:
    """The environment for such a command: the process's, without the host's own variables
    (HOST_*: its tokens among them) and without Django's settings module."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("HOST_") and k not in ("DJANGO_SETTINGS_MODULE", "REDIS_URL")
    }
    env.update(extra)
    return env
