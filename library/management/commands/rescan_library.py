"""Rescan the installed stores now, in this process, and print what each holds."""

from django.core.management.base import BaseCommand

from library import services


class Command(BaseCommand):
    help = "Rescan Steam, Heroic and Lutris now and refresh the library."

    def handle(self, *args, **options):
        for store, count in services.rescan_all().items():
            self.stdout.write(f"{store}: {count} installed titles")
