"""Shared fixtures: the real host for end-to-end tests, and a few helpers for unit tests."""

from __future__ import annotations

import base64
import subprocess
import tempfile
from pathlib import Path

import pytest

from tests.support import exclusive, overrun_watch, reaper_watch
from tests.support.livehost import running_host

ADMIN_USER = "admin"
ADMIN_PASSWORD = "correct horse battery staple"


@pytest.fixture(scope="session")
def live_host():
    """One real host for the whole session: runhost, daphne over TLS, Redis, Celery worker.

    Admin credentials are set through the first-run route, as a newcomer would. Its fleet
    refresh is off: the placement tests write its members' views by hand (tests/fleet/
    fleetkit.py), and a refresh of those stand-ins would rewrite them mid-test.
    """
    with running_host((ADMIN_USER, ADMIN_PASSWORD), env={"HOST_FLEET_REFRESH_S": "0"}) as host:
        yield host


@pytest.fixture(scope="session")
def redis_url():
    """The one kind of Redis the in-process tests use: a private redis-server on a unix
    socket, started as the supervisor starts the host's (same binary, same arguments)."""
    from supervisor import redis_server

    tmp = Path(tempfile.mkdtemp(prefix="tests-redis-"))
    sock = tmp / "redis.sock"
    proc = subprocess.Popen(
        redis_server.redis_argv(sock, tmp / "data"),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"unix://{sock}"
    try:
        redis_server.wait_ready(url)
        yield url
    finally:
        proc.terminate()
        proc.wait(10)


@pytest.fixture
def redis_db(redis_url, settings):
    """The host's Redis accessor pointed at the test server, emptied: the client every product
    module gets from `common.redis_client.client()` during this test."""
    from common import redis_client

    settings.REDIS_URL = redis_url
    client = redis_client.client()
    client.flushall()
    return client


@pytest.fixture
def admin_auth():
    return (ADMIN_USER, ADMIN_PASSWORD)


def basic(user: str, password: str) -> str:
    """An `Authorization` header value for HTTP Basic."""
    return "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()


@pytest.fixture
def restore_config(redis_db):
    """Give the test the in-process host's config file back as it found it, and fresh login
    buckets (they live in Redis, as on the host), so tests that write config or fail logins
    cannot leak into each other."""
    from access import throttle
    from hostconfig import store

    path = store.config_path()
    saved = path.read_bytes() if path.exists() else None
    throttle.reset()
    yield path
    throttle.reset()
    if saved is None:
        path.unlink(missing_ok=True)
    else:
        path.write_bytes(saved)


@pytest.fixture
def admin_headers(db, restore_config):
    """Admin credentials set in the in-process host, as Django test-client headers."""
    from access import credentials

    credentials.set_credentials("admin", "s3cret")
    return {"HTTP_AUTHORIZATION": basic("admin", "s3cret")}


def pytest_configure(config):
    if _is_xdist_controller(config):
        return  # runs no test: the workers watch their own
    reaper_watch.start()
    overrun_watch.start()


def _is_xdist_controller(config) -> bool:
    distributing = bool(getattr(config.option, "numprocesses", None))
    return distributing and not hasattr(config, "workerinput")


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config, items):
    """Files in this order: those with `exclusive` tests (they run one after another while
    the other workers wait), slow end-to-end ones, other end-to-end ones, the many short tests
    last. On several workers (each file on one) the run then ends with every worker busy on
    short tests instead of one finishing a long file alone. Each file keeps its own order."""

    def weight(item) -> int:
        if exclusive.marked(item):
            return 0
        if item.get_closest_marker("e2e") is None:
            return 3
        return 1 if item.get_closest_marker("slow") is not None else 2

    first_weight: dict[str, int] = {}
    for item in items:
        path = str(item.path)
        first_weight[path] = min(first_weight.get(path, 3), weight(item))
    items.sort(key=lambda item: first_weight[str(item.path)])


_RUN_LOCK: exclusive.RunLock | None = None


def _run_lock(config) -> exclusive.RunLock | None:
    """The lock every xdist worker of this run shares; None outside xdist."""
    global _RUN_LOCK
    workerinput = getattr(config, "workerinput", None)
    if workerinput is None:
        return None
    if _RUN_LOCK is None:
        where = Path(tempfile.gettempdir()) / f"hostmgmt-tests-{workerinput['testrunuid']}"
        _RUN_LOCK = exclusive.RunLock(where)
    return _RUN_LOCK


def _timeout_s(item) -> float:
    """The timeout pytest-timeout gives `item`: its marker, else --timeout, else the ini."""
    marker = item.get_closest_marker("timeout")
    value = None
    if marker is not None:
        value = marker.args[0] if marker.args else marker.kwargs.get("timeout")
    if value is None:
        value = item.config.getoption("timeout", None) or item.config.getini("timeout")
    try:
        return float(value or 0)
    except (TypeError, ValueError):
        return 0.0


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_protocol(item, nextitem):
    """Outermost, so the wait for another worker's exclusive test counts against no timeout."""
    lock = _run_lock(item.config)
    if lock is None:
        return (yield from _watched(item))
    lock.take(exclusive.marked(item))
    try:
        return (yield from _watched(item))
    finally:
        if not (exclusive.marked(item) and exclusive.marked(nextitem)):
            lock.release()


def _watched(item):
    overrun_watch.WATCH.begin(item.nodeid, _timeout_s(item))
    try:
        return (yield)
    finally:
        overrun_watch.WATCH.end()
