"""`manage.py emit_event <kind> [payload-json] [--count N]`: announce an event by hand.

For operators testing their hooks and for tests and benchmarks that need events from a process
other than the web server (as a Celery worker or plane listener would emit them).
"""

from __future__ import annotations

import json
import time

from django.core.management.base import BaseCommand, CommandError

from hooks import event_kinds, events


class Command(BaseCommand):
    help = "Emit a lifecycle event through the host's event bus."

    def add_arguments(self, parser):
        parser.add_argument("kind", choices=sorted(event_kinds.KINDS))
        parser.add_argument("payload", nargs="?", default="{}", help="payload JSON object")
        parser.add_argument("--count", type=int, default=1)
        parser.add_argument("--interval-ms", type=float, default=0.0)
        parser.add_argument(
            "--stamp", action="store_true", help="add `sent_ns` (time.time_ns()) to each payload"
        )

    def handle(self, *args, kind, payload, count, interval_ms, stamp, **options):
        try:
            body = json.loads(payload)
        except json.JSONDecodeError as exc:
            raise CommandError(f"payload is not JSON: {exc}") from None
        if not isinstance(body, dict):
            raise CommandError("payload must be a JSON object")
        for _ in range(max(1, count)):
            if stamp:
                body["sent_ns"] = time.time_ns()
            events.emit(kind, body)
            if interval_ms:
                time.sleep(interval_ms / 1000)
