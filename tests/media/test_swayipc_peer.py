"""The host talks sway IPC only to the sway it started: the socket sits in a directory the
compositor's user can write, so an app could put its own listener there and answer for sway."""

from __future__ import annotations

import os
import socket

import pytest

from media.wayland.swayipc import SwayIPC, SwayIPCError


@pytest.fixture
def listener(tmp_path):
    path = str(tmp_path / "sway-ipc.sock")
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    srv.bind(path)
    srv.listen(4)
    yield path
    srv.close()


def test_a_socket_another_process_listens_on_is_refused(listener):
    with pytest.raises(SwayIPCError, match=f"belongs to pid {os.getpid()}, not sway"):
        SwayIPC(listener, peer_pid=os.getpid() + 1)


def test_the_expected_process_is_accepted(listener):
    ipc = SwayIPC(listener, peer_pid=os.getpid())
    ipc.close()
