"""`manage.py mint_token NAME --scope S [--scope S ...]`: mint a scoped admin API token.

The plaintext goes to stdout only (once); it is never stored or logged.
"""

from django.core.management.base import BaseCommand, CommandError

from access.scopes import SCOPES
from console import tokens


class Command(BaseCommand):
    help = "Mint a scoped admin API token and print it once. Scopes: " + ", ".join(sorted(SCOPES))

    def add_arguments(self, parser):
        parser.add_argument("name", help="token name: letters, digits, '.', '_', '-'")
        parser.add_argument(
            "--scope",
            action="append",
            dest="scopes",
            required=True,
            help="a scope to grant (repeat for several); '*' is full admin",
        )

    def handle(self, *args, name, scopes, **options):
        try:
            plaintext = tokens.mint(name, scopes)
        except tokens.TokenError as exc:
            raise CommandError(str(exc)) from None
        self.stdout.write(plaintext)
