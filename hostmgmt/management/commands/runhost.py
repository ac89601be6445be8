"""`manage.py runhost`: start the whole host (see supervisor.main)."""

from django.core.management.base import BaseCommand, CommandError

from supervisor.main import StartupError, StopRequested, Supervisor


class Command(BaseCommand):
    help = "Start the streaming host: web UI and APIs over TLS, Celery worker, Redis, planes."

    def add_arguments(self, parser):
        parser.add_argument(
            "--no-mgmt-token",
            action="store_true",
            help="serve the management API without a token (loopback binds only)",
        )

    def handle(self, *args, **options):
        supervisor = Supervisor(no_mgmt_token=options["no_mgmt_token"])
        supervisor.install_signals()  # before anything: a stop at any moment is honoured
        try:
            supervisor.prepare()
        except (StartupError, ValueError) as exc:
            raise CommandError(str(exc)) from None
        except StopRequested:
            raise SystemExit(0) from None
        raise SystemExit(supervisor.run())
