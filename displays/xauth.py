"""The MIT-MAGIC-COOKIE-1 that guards the X servers the host starts.

An X server started without `-auth` lets every local user in: any uid could read the streamed
screen and inject XTEST input into the apps on it. Each Xvfb the host starts reads the host's
cookie file (`<state dir>/Xauthority`, 0600, one random cookie per state directory); other
uids cannot read it, so the server refuses them. The host's own uid is admitted by the server
itself (xvfb.py adds `localuser` with the cookie), so its capture, input and apps need no
XAUTHORITY; the cookie is for a client of another uid the operator chooses to give it to.

The file is written here (the format is small) rather than by the `xauth` binary. Its entries
match any display number (`number` empty): FamilyWild for libXau (libX11, libxcb, mss) and
FamilyLocal with this host's name for python-xlib, which ignores FamilyWild.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import socket
import stat
import struct
from pathlib import Path

from common.statedir import state_dir

FILE = "Xauthority"
AUTH_NAME = b"MIT-MAGIC-COOKIE-1"
FAMILY_LOCAL = 256
FAMILY_WILD = 65535
COOKIE_BYTES = 16


class XauthError(RuntimeError):
    """The host's cookie file cannot be made or read."""


def path() -> Path:
    return state_dir() / FILE


def _field(data: bytes) -> bytes:
    return struct.pack(">H", len(data)) + data


def entries(cookie: bytes, hostname: str | None = None) -> bytes:
    """The file's bytes: one FamilyWild and one FamilyLocal entry, any display number."""
    host = (hostname if hostname is not None else socket.gethostname()).encode()
    out = b""
    for family, address in ((FAMILY_WILD, b""), (FAMILY_LOCAL, host)):
        out += struct.pack(">H", family) + _field(address) + _field(b"")
        out += _field(AUTH_NAME) + _field(cookie)
    return out


def parse(data: bytes) -> list[tuple[int, bytes, bytes, bytes, bytes]]:
    """(family, address, number, name, data) of every entry; XauthError when malformed."""
    out, i = [], 0
    while i < len(data):
        if i + 2 > len(data):
            raise XauthError("truncated entry")
        (family,) = struct.unpack_from(">H", data, i)
        i += 2
        fields = []
        for _ in range(4):
            if i + 2 > len(data):
                raise XauthError("truncated entry")
            (n,) = struct.unpack_from(">H", data, i)
            i += 2
            if i + n > len(data):
                raise XauthError("truncated entry")
            fields.append(data[i : i + n])
            i += n
        out.append((family, *fields))
    return out


def _usable(p: Path) -> bool:
    """Ours, 0600, a regular file (not a link), with a host cookie for this host name."""
    try:
        fd = os.open(p, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return False
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_uid != os.geteuid():
            return False
        if stat.S_IMODE(st.st_mode) != 0o600 or st.st_size > 4096:
            return False
        data = os.read(fd, 4096)
    finally:
        os.close(fd)
    try:
        got = parse(data)
    except XauthError:
        return False
    host = socket.gethostname().encode()
    return any(
        e[0] == FAMILY_LOCAL and e[1] == host and e[3] == AUTH_NAME and len(e[4]) == COOKIE_BYTES
        for e in got
    ) and any(e[0] == FAMILY_WILD and e[3] == AUTH_NAME for e in got)


def ensure() -> Path:
    """The cookie file, made now (atomically, 0600) when missing or not usable (another
    owner, another mode, a link: its cookie may have been seen, so a new one); its path. A
    usable file keeps its cookie, so displays already running still accept the host."""
    p = path()
    if _usable(p):
        return p
    cookie = secrets.token_bytes(COOKIE_BYTES)
    tmp = p.with_name(f".{FILE}.{os.getpid()}.{secrets.token_hex(4)}")
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
                     0o600)  # fmt: skip
        try:
            os.fchmod(fd, 0o600)
            os.write(fd, entries(cookie))
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, p)
    except OSError as exc:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise XauthError(f"cannot write {p}: {exc.strerror}") from None
    return p
