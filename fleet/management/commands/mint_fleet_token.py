"""`manage.py mint_fleet_token NAME`: mint a fleet token for a fleet host that will manage this
one (docs/fleet.md). The plaintext goes to stdout only, once; only its digest is kept."""

from django.core.management.base import BaseCommand, CommandError

from access import fleet_tokens


class Command(BaseCommand):
    help = "Mint a fleet token (read status/sessions/library/events, end sessions) and print it."

    def add_arguments(self, parser):
        parser.add_argument("name", help="which fleet host it is for: letters, digits, . _ -")

    def handle(self, *args, name, **options):
        try:
            token = fleet_tokens.mint(name)
        except fleet_tokens.FleetTokenError as exc:
            raise CommandError(str(exc)) from None
        self.stdout.write(token)
