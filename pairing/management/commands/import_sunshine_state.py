"""Import paired clients from a Sunshine-style state file (`sunshine_state.json`), so devices
paired with that host keep working here without pairing again.

Reads `root.named_devices[] {name, cert, uuid, enabled}` and the older `root.devices[].certs[]`
layout. Certificates already paired here are left alone; ones that do not parse are reported.
"""

from __future__ import annotations

import json
import uuid as uuidlib
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError
from django.db import transaction

from common.names import sanitize_name
from pairing import crypto
from pairing.models import PairedClient


def _entries(root: dict) -> list[dict]:
    entries = []
    for dev in root.get("named_devices") or []:
        if isinstance(dev, dict):
            entries.append(dev)
    for dev in root.get("devices") or []:
        if not isinstance(dev, dict):
            continue
        for pem in dev.get("certs") or []:
            entries.append({"name": dev.get("name") or "", "cert": pem, "enabled": True})
    return entries


def _uuid(value) -> str | None:
    try:
        return str(uuidlib.UUID(str(value))).upper()
    except ValueError:
        return None


class Command(BaseCommand):
    help = "Import paired clients from a Sunshine-style sunshine_state.json."

    def add_arguments(self, parser):
        parser.add_argument("state_file", type=Path)
        parser.add_argument("--dry-run", action="store_true", help="report, change nothing")

    def handle(self, *args, state_file: Path, dry_run: bool, **options):
        try:
            doc = json.loads(state_file.read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise CommandError(f"{state_file}: no such file") from None
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise CommandError(f"{state_file}: not a JSON state file ({exc})") from None
        root = doc.get("root") if isinstance(doc, dict) else None
        if not isinstance(root, dict):
            raise CommandError(f"{state_file}: no `root` object; not a Sunshine state file")

        imported = skipped = bad = 0
        with transaction.atomic():
            for i, entry in enumerate(_entries(root)):
                pem = entry.get("cert")
                try:
                    cert = crypto.load_client_cert(str(pem or "").encode())
                except crypto.CertificateError as exc:
                    self.stderr.write(f"entry {i}: skipped, {exc}")
                    bad += 1
                    continue
                fp = crypto.fingerprint(cert)
                if PairedClient.objects.filter(fingerprint=fp).exists():
                    skipped += 1
                    continue
                fields = {
                    "fingerprint": fp,
                    "cert_pem": crypto.cert_pem(cert),
                    "name": sanitize_name(str(entry.get("name") or "")),
                    "enabled": entry.get("enabled", True) is not False,
                }
                uid = _uuid(entry.get("uuid"))
                if uid and not PairedClient.objects.filter(uuid=uid).exists():
                    fields["uuid"] = uid
                if not dry_run:
                    PairedClient.objects.create(**fields)
                imported += 1
        verb = "would import" if dry_run else "imported"
        self.stdout.write(
            f"{verb} {imported} client(s); {skipped} already paired; {bad} unreadable"
        )
