#!/usr/bin/env python
"""Django's command-line entry point for the streaming host."""

import os
import sys

from supervisor import launcher  # stdlib only: it decides which tree runs before Django loads


def main() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "hostmgmt.settings")
    if sys.argv[1:2] == ["runhost"]:
        launcher.follow(sys.argv)  # returns to run this tree
    # Django after the settings module is named (Django's own manage.py order).
    from django.core.exceptions import ImproperlyConfigured
    from django.core.management import execute_from_command_line

    try:
        execute_from_command_line(sys.argv)
    except ImproperlyConfigured as exc:
        if not str(exc).startswith("host config key"):
            raise
        # A bad host.conf value read at start: one line naming the key, nothing started.
        sys.exit(f"error: {exc}")


if __name__ == "__main__":
    main()
