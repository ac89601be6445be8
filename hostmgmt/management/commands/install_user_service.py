"""`manage.py install_user_service [--print] [--enable]`: run the host with the desktop session.

Writes `~/.config/systemd/user/hostmgmt.service` for this checkout (see
`supervisor/user_unit.py`); `--enable` also asks the user's systemd to start it now and
with every graphical login. Refused as root: the host streams the desktop of the user it runs as.
"""

import os
import shutil
import subprocess
import sys
from pathlib import Path

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from supervisor import user_unit

ROOT_REFUSAL = (
    "refusing to install a user service as root: run this as the desktop user whose session "
    "the host should stream (root has no graphical session, and sway refuses to run as root)"
)


class Command(BaseCommand):
    help = "Install a systemd user unit that runs the host inside your graphical session."

    def add_arguments(self, parser):
        parser.add_argument("--print", action="store_true", help="print the unit, write nothing")
        parser.add_argument(
            "--enable", action="store_true", help="also enable and start it (systemctl --user)"
        )

    def handle(self, *args, **options):
        repo = Path(settings.BASE_DIR)
        if options["print"]:
            env = {k: os.environ[k] for k in user_unit.CARRIED_ENV if os.environ.get(k)}
            try:
                text = user_unit.render(sys.executable, str(repo / "manage.py"), str(repo), env)
            except user_unit.UnitError as exc:
                raise CommandError(f"cannot write the unit: {exc}") from None
            self.stdout.write(text)
            return
        if os.geteuid() == 0:
            raise CommandError(ROOT_REFUSAL)
        try:
            path = user_unit.install(Path.home(), repo, dict(os.environ))
        except (user_unit.UnitError, OSError) as exc:
            raise CommandError(f"cannot write the unit: {exc}") from None
        self.stdout.write(f"wrote {path}")
        if not options["enable"]:
            self.stdout.write(f"start it with: systemctl --user enable --now {user_unit.UNIT_NAME}")
            return
        if shutil.which("systemctl") is None:
            raise CommandError("systemctl is not installed: start the host with `make run`")
        for argv in (
            ["systemctl", "--user", "daemon-reload"],
            ["systemctl", "--user", "enable", "--now", user_unit.UNIT_NAME],
        ):
            done = subprocess.run(argv, capture_output=True, text=True, timeout=60)
            if done.returncode != 0:
                raise CommandError(f"{' '.join(argv)} failed: {done.stderr.strip()[:500]}")
        self.stdout.write(f"enabled and started {user_unit.UNIT_NAME}")
