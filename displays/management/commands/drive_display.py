"""Walk a virtual display through its states by hand: `manage.py drive_display acquire ...`.

The streaming engine calls the same functions (`displays.machine`) when a session
opens and ends; this command lets an operator or a test do it without a client. Run it with the
host's environment (HOST_STATE_DIR) so it works on that host's displays. Prints JSON.
"""

from __future__ import annotations

import json

from django.core.management.base import BaseCommand, CommandError

from displays import machine


class Command(BaseCommand):
    help = "acquire / disconnect / release / state of virtual displays (prints JSON)"

    def add_arguments(self, parser):
        sub = parser.add_subparsers(dest="action", required=True)
        acquire = sub.add_parser("acquire")
        acquire.add_argument("--client", default="manual")
        acquire.add_argument("--mode", default="1280x720@60")
        disconnect = sub.add_parser("disconnect")
        disconnect.add_argument("--slot", type=int, required=True)
        disconnect.add_argument("--deliberate", action="store_true")
        release = sub.add_parser("release")
        release.add_argument("--slot", type=int, default=None)
        sub.add_parser("state")

    def handle(self, *args, action, **opts):
        try:
            if action == "acquire":
                result = machine.acquire(opts["client"], opts["mode"])
            elif action == "disconnect":
                result = machine.disconnect(opts["slot"], opts["deliberate"])
            elif action == "release":
                result = {"released": machine.release(opts["slot"])}
            else:
                result = machine.state()
        except machine.DisplayError as exc:
            raise CommandError(exc.message) from None
        self.stdout.write(json.dumps(result))
