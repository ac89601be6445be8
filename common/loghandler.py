"""The host's log file handler: a full or read-only disk drops lines instead of the host.

Why: `logging`'s own handlers print a traceback to stderr for every line they fail to write
(and a process whose stderr is a file on the same disk may then fail too). Here a write the
disk refuses drops the line and counts it; one warning goes to stderr when dropping starts and
one line to the file when writing works again, naming how many were lost. Streaming, the APIs
and every other part go on. Stdlib only: the logging config loads it before the apps.
"""

from __future__ import annotations

import logging
import logging.handlers
import sys
import threading

from common.files import DISK_ERRNOS


class DiskSafeFileHandler(logging.handlers.WatchedFileHandler):
    def __init__(self, filename, mode="a", encoding=None, delay=False, errors=None):
        self.dropped = 0
        self._drop_lock = threading.Lock()
        try:
            super().__init__(filename, mode, encoding, delay, errors)
        except OSError as exc:
            if exc.errno not in DISK_ERRNOS:
                raise
            super().__init__(filename, mode, encoding, True, errors)  # opened at the first line
            self._dropping(exc)

    def emit(self, record: logging.LogRecord) -> None:
        try:
            if self.dropped and self._try_resume():
                return super().emit(record)
            if self.dropped:
                self._count()
                return None
            return super().emit(record)
        except OSError as exc:
            if exc.errno not in DISK_ERRNOS:
                raise
            self._dropping(exc)

    def handleError(self, record: logging.LogRecord) -> None:  # logging's name
        exc = sys.exc_info()[1]
        if isinstance(exc, OSError) and exc.errno in DISK_ERRNOS:
            self._dropping(exc)
            return
        super().handleError(record)

    def _count(self) -> None:
        with self._drop_lock:
            self.dropped += 1

    def _dropping(self, exc: OSError) -> None:
        with self._drop_lock:
            first = self.dropped == 0
            self.dropped += 1
        if first:
            sys.stderr.write(
                f"host log {self.baseFilename}: {DISK_ERRNOS[exc.errno]}; log lines are "
                "dropped (and counted) until the disk takes writes again\n"
            )
        self._close_quietly()

    def _close_quietly(self) -> None:
        stream, self.stream = self.stream, None
        if stream is not None:
            try:
                stream.close()  # flushes: may fail again on a full disk
            except OSError:
                pass

    def _try_resume(self) -> bool:
        """One probe write of the drop count; True when the disk took it."""
        try:
            if self.stream is None:
                self.stream = self._open()
            self.stream.write(f"[{self.dropped} log line(s) dropped: the disk refused them]\n")
            self.stream.flush()
        except OSError:
            self._close_quietly()
            self._count()
            return False
        with self._drop_lock:
            self.dropped = 0
        return True
