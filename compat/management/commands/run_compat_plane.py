"""The compat plane's listener process: nvhttp over HTTP (base port) and HTTPS (base - 5), and
the mDNS announcement while the compat broadcast switch is on. `runhost` starts it; it also
runs alone (`manage.py run_compat_plane`) against the same state dir.
"""

from __future__ import annotations

import importlib
import logging
import threading

from django.conf import settings
from django.core.management.base import BaseCommand
from twisted.internet import reactor, task, threads

from access import identity
from compat.mdns import Announcer
from compat.nvhttp import transport
from compat.nvhttp.coordinator import PairingCoordinator
from compat.nvhttp.dispatch import Dispatcher
from compat.nvhttp_backend import NvhttpBackend, warm_probe
from hostconfig import store
from pairing import conf

log = logging.getLogger("compat")

# Modules that add routes to the HTTPS side (e.g. /launch, /resume, /cancel): each one that
# exists is imported and its `install(dispatcher, backend)` called before the listeners open.
EXTENSIONS = ("compat.session_routes",)


def _install_extensions(dispatcher, backend) -> None:
    for name in EXTENSIONS:
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as exc:
            if exc.name == name:
                continue
            raise
        module.install(dispatcher, backend)
        log.info("compat plane extension %s installed", name)


def _compat_enabled() -> bool:
    return bool(store.get("compat_enabled"))


class Command(BaseCommand):
    help = "Run the compat plane's nvhttp listeners (HTTP and client-certificate HTTPS) and mDNS."

    def add_arguments(self, parser):
        parser.add_argument("--no-mdns", action="store_true", help="never announce over mDNS")

    def handle(self, *args, **options):
        identity.ensure_identity()
        identity.ensure_tls()
        backend = NvhttpBackend()
        threading.Thread(target=warm_probe, name="encoder-probe", daemon=True).start()
        stale = backend.clear_stale_requests()
        if stale:
            log.info("dropped %d PIN requests left by an earlier listener", stale)
        coordinator = PairingCoordinator(
            backend, pin_timeout=conf.pin_timeout_s(), step_timeout=conf.step_timeout_s()
        )
        dispatcher = Dispatcher(backend, coordinator)
        _install_extensions(dispatcher, backend)

        ports = settings.PORTS
        bind = settings.HOST_BIND
        transport.listen(
            dispatcher,
            bind=bind,
            http_port=ports.http,
            https_port=ports.https,
            cert_path=str(identity.cert_path()),
            key_path=str(identity.key_path()),
        )
        reactor.addSystemEventTrigger("before", "shutdown", coordinator.shutdown)
        # Periodic work outside the supervisor's registry (supervisor/periodic.py),
        # because it must run in this process: the pairing attempt it times out (a client that
        # went quiet mid-handshake) lives in this coordinator's memory, beside the request
        # threads that hold it. A knock or a phase reaps too; this covers a client that never
        # sends another request, so the one pairing slot frees and `pairing.denied` goes out.
        reaper = task.LoopingCall(lambda: threads.deferToThread(coordinator.reap))
        reaper.start(1.0, now=False)

        announcer = None
        if not options["no_mdns"]:
            announcer = Announcer(
                port=ports.http, bind=bind, enabled=_compat_enabled, hostname=identity.host_name
            )
            announcer.start()
            reactor.addSystemEventTrigger("before", "shutdown", announcer.stop)
        log.info(
            "compat plane listening on %s: nvhttp http %d, https %d", bind, ports.http, ports.https
        )
        reactor.run()
