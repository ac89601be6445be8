"""`manage.py fleet_identity`: what an operator joining this host to a fleet pins: its URL(s)
and its certificate's SHA-256 fingerprint."""

from django.core.management.base import BaseCommand, CommandError

from fleet import identity


class Command(BaseCommand):
    help = "Print this host's management URL(s) and certificate SHA-256 fingerprint."

    def handle(self, *args, **options):
        shown = identity.describe()
        if not shown["fingerprint"]:
            raise CommandError("no TLS certificate yet: start the host once (manage.py runhost)")
        for url in shown["urls"]:
            self.stdout.write(f"url {url}")
        self.stdout.write(f"fingerprint {shown['fingerprint']}")
