"""mDNS announcement of the compat plane: `_nvstream._tcp.local.` on the nvhttp HTTP port.

The announcer follows a switch (the config key `compat_enabled`) and the host's name (the config
key `sunshine_name`, else the OS host name) by polling them, so turning the broadcast off
withdraws the record (a goodbye packet), turning it on announces again, and a new name replaces
the old record, all without a restart. Two hosts on one machine each announce their own name.
Moonlight clients browse this type, then ask `/serverinfo` on each address.
"""

from __future__ import annotations

import ipaddress
import logging
import re
import socket
import threading
from collections.abc import Callable

import ifaddr
from zeroconf import InterfaceChoice, IPVersion, ServiceInfo, Zeroconf

from common import netranges

log = logging.getLogger(__name__)

SERVICE_TYPE = "_nvstream._tcp.local."


def instance_name(hostname: str | None = None) -> str:
    """The OS host name cut to what mDNS labels allow: 63 chars, spaces as '-', [A-Za-z0-9-]."""
    name = (hostname if hostname is not None else socket.gethostname())[:63].replace(" ", "-")
    match = re.match(r"[A-Za-z0-9-]*", name)
    name = match.group(0) if match else ""
    return name or "Sunshine"


def _addresses(bind: str) -> tuple[list[bytes], list[str] | InterfaceChoice]:
    """Packed addresses to advertise and the interfaces to answer on, from the bind address."""
    try:
        ip = ipaddress.ip_address(bind)
    except ValueError:
        ip = None
    if ip is not None and not ip.is_unspecified:
        return [ip.packed], [str(ip)]
    packed = []
    for adapter in ifaddr.get_adapters():
        for item in adapter.ips:
            if isinstance(item.ip, str):
                addr = ipaddress.ip_address(item.ip)
                if not netranges.is_loopback(addr):
                    packed.append(addr.packed)
    return packed, InterfaceChoice.All


class Announcer:
    """Keeps the service registered exactly while `enabled()` is true."""

    def __init__(
        self,
        *,
        port: int,
        bind: str,
        enabled: Callable[[], bool],
        poll_s: float = 1.0,
        hostname: Callable[[], str] = socket.gethostname,
    ):
        self.port = port
        self.bind = bind
        self.enabled = enabled
        self.poll_s = poll_s
        self.hostname = hostname
        self.name = instance_name(hostname())
        self._zc: Zeroconf | None = None
        self._info: ServiceInfo | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    @property
    def announced(self) -> bool:
        return self._info is not None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="mdns", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)
        self._withdraw()
        if self._zc is not None:
            self._zc.close()
            self._zc = None

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                want = bool(self.enabled())
                name = instance_name(self.hostname())
            except Exception:  # an unreadable switch keeps the current state
                log.exception("reading the compat broadcast switch failed")
                want, name = self.announced, self.name
            try:
                if want and self.announced and name != self.name:
                    self._withdraw()
                self.name = name
                if want and not self.announced:
                    self._announce()
                elif not want and self.announced:
                    self._withdraw()
            except Exception:  # retry on the next poll
                log.exception("mDNS update failed")
            self._stop.wait(self.poll_s)

    def _announce(self) -> None:
        addresses, interfaces = _addresses(self.bind)
        if self._zc is None:
            v6 = any(len(a) == 16 for a in addresses)
            version = IPVersion.V6Only if v6 else IPVersion.V4Only
            self._zc = Zeroconf(interfaces=interfaces, ip_version=version)
        info = ServiceInfo(
            SERVICE_TYPE,
            f"{self.name}.{SERVICE_TYPE}",
            port=self.port,
            addresses=addresses,
            properties={},
            server=f"{self.name}.local.",
        )
        self._zc.register_service(info, allow_name_change=True)
        self._info = info
        log.info("mDNS: announcing %s on port %d", info.name, self.port)

    def _withdraw(self) -> None:
        if self._info is None or self._zc is None:
            self._info = None
            return
        info, self._info = self._info, None
        self._zc.unregister_service(info)
        log.info("mDNS: withdrew %s", info.name)
