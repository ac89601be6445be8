"""The WebCodecs frame sockets live in the host's state directory, in a 0700 directory of the
host's user, never in a shared /tmp directory that another user could have made first."""

from __future__ import annotations

import os
import stat

import pytest

from native import wsvideo


@pytest.fixture
def state(tmp_path, monkeypatch):
    monkeypatch.setenv("HOST_STATE_DIR", str(tmp_path))
    return tmp_path


def test_created_fresh_0700_in_the_state_dir(state):
    old = os.umask(0)  # a permissive umask must not widen it
    try:
        path = wsvideo.socket_dir()
    finally:
        os.umask(old)
    assert path == state / "native-ws"
    st = os.lstat(path)
    assert stat.S_ISDIR(st.st_mode) and st.st_uid == os.getuid()
    assert stat.S_IMODE(st.st_mode) == 0o700
    assert wsvideo.socket_dir() == path  # an existing good one is reused
    sock = wsvideo.WsVideo(encoder=None).path
    assert os.path.dirname(sock) == str(path) and len(sock.encode()) < 108  # AF_UNIX limit


def test_a_loose_or_foreign_directory_is_refused(state, tmp_path_factory):
    path = state / "native-ws"
    path.mkdir(mode=0o755)
    os.chmod(path, 0o755)
    with pytest.raises(wsvideo.UnsafeSocketDir, match="0755"):
        wsvideo.socket_dir()
    path.rmdir()
    elsewhere = tmp_path_factory.mktemp("planted")
    os.chmod(elsewhere, 0o700)
    path.symlink_to(elsewhere)  # a link planted in its place, even to a 0700 directory
    with pytest.raises(wsvideo.UnsafeSocketDir, match="not a directory"):
        wsvideo.socket_dir()
