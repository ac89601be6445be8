"""Write-time checks that need the machine, not just the value: a 400 naming the key when an
update could only fail at the next start (a base port another program holds, an address no
interface has, a certificate that does not match its key, an `encoder` that cannot open here).
Values the machine cannot judge now are checked again at start (settings, identity.ensure_tls,
streaming.sessions.encoding.check_pin)."""

from __future__ import annotations

import json
import os
import socket
from pathlib import Path
from typing import Any

from django.conf import settings

from access import identity
from common.ports import PortMap, busy_ports
from hostconfig import store
from hostconfig.startup import unusable_log_path
from media import encoders


def at_write(typed: dict[str, Any]) -> dict[str, Any]:
    """`typed` unchanged, or store.ConfigError naming every key that cannot work here."""
    errors: dict[str, str] = {}
    if "cert" in typed or "pkey" in typed:
        _tls(typed, errors)
    if typed.get("bind_address"):
        _bindable(typed["bind_address"], errors)
    if typed.get("file_apps"):
        _apps_file(typed["file_apps"], errors)
    if typed.get("log_path"):
        problem = unusable_log_path(Path(typed["log_path"]))
        if problem:
            errors["log_path"] = problem
    errors.update(encoder_refusal(typed))
    if typed.get("port") is not None:
        slots = typed.get("max_sessions") or store.get("max_sessions")
        _port(typed["port"], typed.get("bind_address"), errors, slots)
    if errors:
        raise store.ConfigError(errors)
    return typed


def encoder_refusal(typed: dict[str, Any]) -> dict[str, str]:
    """`{"encoder": why}` when the update pins an encoder backend that cannot open on this
    machine (a session would refuse to stream: streaming.sessions.encoding.check_pin)."""
    problem = encoders.pin_problem(typed["encoder"]) if typed.get("encoder") else ""
    return {"encoder": problem} if problem else {}


def _tls(typed: dict, errors: dict) -> None:
    cert = typed["cert"] if "cert" in typed else store.get("cert")
    key = typed["pkey"] if "pkey" in typed else store.get("pkey")
    if not cert and not key:
        return  # back to the generated pair
    try:
        identity.check_pair(cert, key)
    except identity.TlsConfigError as exc:
        name, _, why = str(exc).partition(": ")
        errors[name] = why


def _bindable(address: str, errors: dict) -> None:
    family = socket.AF_INET6 if ":" in address else socket.AF_INET
    with socket.socket(family, socket.SOCK_DGRAM) as sock:
        try:
            sock.bind((address, 0))
        except OSError:
            errors["bind_address"] = f"no interface of this host has the address {address}"


def _port(base: int, bind: str | None, errors: dict, slots: int = 1) -> None:
    """Every port of the new base, the stream ports of each of `max_sessions` slots too."""
    if base == settings.PORTS.base:
        return  # the running host holds its own ports
    bind = bind or settings.HOST_BIND
    try:
        busy = busy_ports(bind, PortMap(base), slots)
    except (OSError, ValueError):
        return  # the start checks again
    if busy:
        numbers = ", ".join(str(n) for n, _ in busy)
        errors["port"] = f"ports {numbers} of base port {base} are in use on {bind}"


def _apps_file(value: str, errors: dict) -> None:
    """The catalog the host will read and write at once: a `.json` file that is a catalog
    already, or a new one in a directory the host can write. Never any other file (the host
    rewrites the catalog in place)."""
    path = Path(value)
    if path.suffix != ".json":
        errors["file_apps"] = "must name a .json file"
    elif path.exists():
        try:
            doc = json.loads(path.read_bytes())
        except (OSError, ValueError) as exc:
            errors["file_apps"] = f"{path} is not a readable JSON app catalog ({exc})"
            return
        if not isinstance(doc, dict) or not isinstance(doc.get("apps", []), list):
            errors["file_apps"] = f"{path} is not an app catalog (no `apps` array)"
        elif not os.access(path, os.W_OK):
            errors["file_apps"] = f"{path} is not writable by the host"
    elif not path.parent.is_dir() or not os.access(path.parent, os.W_OK | os.X_OK):
        errors["file_apps"] = f"the directory {path.parent} does not exist or is not writable"
