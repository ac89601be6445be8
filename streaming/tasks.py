"""Celery tasks of the streaming engine: one long task per compat session.

The session occupies one process of the main prefork worker (concurrency 4 by default) for
its whole life; the stream ports are fixed per host, so one session at a time (the /launch
claim refuses a second). Host shutdown: the supervisor's SIGTERM starts the worker's warm
shutdown, which waits for running tasks; `worker_shutting_down` (in the worker's main process)
asks the session to stop, so the wait is short and the session still cleans up after itself.
"""

from __future__ import annotations

import logging
import signal

from celery import shared_task
from celery.signals import worker_shutting_down

log = logging.getLogger("streaming.sessions")


@shared_task(name="streaming.run_session", ignore_result=True, acks_late=False)
def run_session(spec: dict) -> str:
    """The supervisor stops the worker with SIGTERM to its whole process group, so this pool
    process gets one too: while a session runs it only flags the shutdown (the session ends
    through its normal cleanup: app group, undo steps, display, record). The signal is not
    delivered again: the worker's warm shutdown closes the pool once this task has returned
    (re-raising it would lose the task's result: WorkerLostError)."""
    from streaming import session_runner

    got = []

    def on_term(signum, frame):
        got.append(signum)
        session_runner.SHUTDOWN.set()

    try:
        previous = signal.signal(signal.SIGTERM, on_term)
    except ValueError:  # not the main thread (an eager call in tests): nothing to catch
        previous = None
    try:
        return session_runner.run(spec)
    finally:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)
        if got:
            log.info("session task ended for host shutdown")


@worker_shutting_down.connect
def _stop_session_on_shutdown(sender=None, **kwargs) -> None:
    if not str(sender or "").startswith("host-"):  # the hooks worker never runs sessions
        return
    try:
        from streaming import services

        if services.request_stop("host_shutdown", deliberate=False):
            log.info("host shutting down: stopping the running session")
    except Exception:  # noqa: BLE001 - shutdown goes on regardless
        log.warning("could not ask the running session to stop")
