"""What the supervisor announces when the host comes up and winds down.

The event bus (`hooks.events`) turns these into `host.started` / `host.stopping`.
"""

from __future__ import annotations

import logging

log = logging.getLogger("hostmgmt.supervisor")


def announce_started() -> None:
    log.info("host started")


def announce_stopping() -> None:
    log.info("host stopping")
