"""Frames of a PipeWire video node, through GStreamer's pipewiresrc in a `gst-launch-1.0`
subprocess that writes raw BGRx at the asked size to a pipe (no PipeWire protocol code here).

Mutter sends a frame only when the screen changes, while the encoder wants one at the
stream's rate: a reader thread keeps the LATEST frame, and `latest()` returns it at once (it
waits only for the first one). The subprocess runs in its own process group and `close` ends
that group, so no gst-launch outlives its source.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import tempfile
import threading

import numpy as np

GST_LAUNCH = "gst-launch-1.0"


class FrameStreamError(Exception):
    """The pipeline could not start, died, or sent no first frame; the message says which,
    with the end of gst-launch's stderr."""


def pipeline_argv(node_id: int, width: int, height: int, fd: int | None = None) -> list[str]:
    """always-copy: mutter reuses its shared-memory buffers, and a buffer held past its
    release would tear. `path` is deprecated in GStreamer 1.22 in favour of `target-object`,
    which takes a node name or object serial, not the node id mutter announces. `fd`: a
    PipeWire remote already connected (the desktop portal's), used instead of the default
    socket."""
    remote = [f"fd={fd}"] if fd is not None else []
    return [
        GST_LAUNCH, "-q",
        "pipewiresrc", *remote, f"path={node_id}", "always-copy=true",
        "!", "videoconvert", "!", "videoscale",
        "!", f"video/x-raw,format=BGRx,width={width},height={height}",
        "!", "fdsink", "fd=1", "sync=false",
    ]  # fmt: skip


class PipeWireFrames:
    """Reads `width`x`height` BGRx frames of PipeWire node `node_id`. `env` is the
    subprocess's environment: it needs the XDG_RUNTIME_DIR (or PIPEWIRE_REMOTE) of the
    PipeWire daemon mutter streams to. `fd`: a PipeWire remote to read through instead (the
    portal's OpenPipeWireRemote): passed to gst-launch under the same number; the caller
    keeps and closes its own copy."""

    def __init__(
        self, node_id: int, width: int, height: int, env: dict | None = None,
        fd: int | None = None,
    ):  # fmt: skip
        if shutil.which(GST_LAUNCH) is None:
            raise FrameStreamError(
                f"{GST_LAUNCH} is not installed (Debian: gstreamer1.0-tools, and "
                "gstreamer1.0-pipewire for pipewiresrc)"
            )
        self.node_id, self.width, self.height = node_id, width, height
        self.frames = 0  # frames received from the pipeline (not grabs)
        self._size = width * height * 4
        self._latest: np.ndarray | None = None
        self._first = threading.Event()
        self._ended = threading.Event()
        # A file, not a pipe: gst can never block on it. Closed by close().
        self._stderr = tempfile.TemporaryFile()  # noqa: SIM115 - lives as long as the process
        self.proc = subprocess.Popen(
            pipeline_argv(node_id, width, height, fd),
            pass_fds=(fd,) if fd is not None else (),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=self._stderr,
            env=env,
            bufsize=0,
            start_new_session=True,
        )
        self._reader = threading.Thread(target=self._read, name=f"pw-frames-{node_id}", daemon=True)
        self._reader.start()

    def _read(self) -> None:
        stream = self.proc.stdout
        try:
            while True:
                buf = bytearray(self._size)  # a new one each frame: `latest()` hands it out
                view, got = memoryview(buf), 0
                while got < self._size:
                    n = stream.readinto(view[got:])
                    if not n:
                        return  # EOF: the pipeline ended
                    got += n
                frame = np.frombuffer(buf, np.uint8).reshape(self.height, self.width, 4)
                self._latest = frame
                self.frames += 1
                self._first.set()
        except (OSError, ValueError):
            return  # closed under us by close()
        finally:
            self._ended.set()
            self._first.set()  # wake a waiting first latest(): it reports the end

    def latest(self, first_timeout: float = 2.0) -> np.ndarray:
        """The newest frame, without waiting once one has come (the array is not reused, a
        caller may keep it). Raises FrameStreamError when the pipeline has ended (even if a
        frame is held: a dead stream must count as a failure, not repeat forever) or when no
        first frame comes within `first_timeout`."""
        if not self._first.wait(first_timeout):
            raise FrameStreamError(
                f"no frame from PipeWire node {self.node_id} in {first_timeout:g} s"
                + self._stderr_tail(", gst-launch says: ")
            )
        if self._ended.is_set():
            code = self.proc.poll()
            raise FrameStreamError(
                f"the pipewiresrc pipeline for node {self.node_id} ended"
                + (f" (exit status {code})" if code is not None else "")
                + self._stderr_tail(": ")
            )
        return self._latest

    def _stderr_tail(self, prefix: str) -> str:
        try:
            self._stderr.seek(0)
            text = self._stderr.read().decode(errors="replace").strip()
        except (OSError, ValueError):
            return ""
        lines = [ln for ln in text.splitlines() if ln.strip()][-3:]
        return prefix + " / ".join(lines) if lines else ""

    def close(self) -> None:
        """End the pipeline's process group (SIGTERM, then SIGKILL after 2 s) and reap it."""
        if self.proc.poll() is None:
            for sig, wait in ((signal.SIGTERM, 2.0), (signal.SIGKILL, 5.0)):
                try:
                    os.killpg(self.proc.pid, sig)
                except ProcessLookupError:
                    break
                try:
                    self.proc.wait(wait)
                    break
                except subprocess.TimeoutExpired:
                    continue
        self.proc.wait()  # reaped in every case
        self.proc.stdout.close()
        self._reader.join(2.0)
        self._stderr.close()
