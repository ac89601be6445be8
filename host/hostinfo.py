"""The full host-info record of `GET /api/v1/host`: identity, versions, codecs, ports."""

from __future__ import annotations

import socket
from pathlib import Path

from django.conf import settings

from access import identity
from common import filecache
from common.version import VERSION
from hostconfig import store
from media import encoders

ABI_VERSION = 1
# What compat-plane clients are told; they gate features on these, not on our own version.
APP_VERSION = "7.1.431.-1"
GFE_VERSION = "3.23.0.74"
OS_RELEASE = Path("/etc/os-release")


def os_release(path: Path = OS_RELEASE) -> dict[str, str]:
    """The file's keys, parsed once per version of it (GET /host asks per request)."""
    return filecache.parsed(path, _parse_os_release, {})


def _parse_os_release(raw: bytes) -> dict[str, str]:
    out = {}
    for line in raw.decode(errors="replace").splitlines():
        if "=" in line and not line.startswith("#"):
            k, v = line.split("=", 1)
            out[k.strip()] = v.strip().strip('"')
    return out


def os_chain(release: dict[str, str]) -> str:
    """`linux[/family][/id]`, generic to specific (e.g. `linux/debian`, `linux/fedora/bazzite`)."""
    parts = ["linux"]
    family = release.get("ID_LIKE", "").split()
    if family:
        parts.append(family[0])
    if release.get("ID") and release["ID"] not in parts:
        parts.append(release["ID"])
    return "/".join(parts)


def local_ip() -> str:
    """The address the host would use to reach the LAN (no packet is sent)."""
    for target in ("192.0.2.1", "2001:db8::1"):
        family = socket.AF_INET6 if ":" in target else socket.AF_INET
        try:
            with socket.socket(family, socket.SOCK_DGRAM) as sock:
                sock.connect((target, 9))
                return sock.getsockname()[0]
        except OSError:
            continue
    return "127.0.0.1"


def host_info() -> dict:
    release = os_release()
    preference = store.get("encoder")
    return {
        "hostname": identity.host_name(),
        "uniqueid": identity.unique_id(),
        "local_ip": local_ip(),
        "version": VERSION,
        "abi_version": ABI_VERSION,
        "app_version": APP_VERSION,
        "gfe_version": GFE_VERSION,
        "os": os_chain(release),
        "os_name": release.get("PRETTY_NAME", "Linux"),
        "codecs": encoders.codecs(preference),
        "encoder": encoders.resolve_backend(preference) or "none",
        # Per codec, the encoders that opened here (GPU ones first, software last), and the
        # encoder families this build cannot have (VAAPI: not in PyAV's wheels).
        **encoders.listing(),
        "compat": bool(store.get("compat_enabled")),
        "ports": settings.PORTS.as_dict(),
    }
