"""moonlight-python's StreamingSession with moonlight-common-c's own log lines kept.

The library's `logMessage` callback is variadic (`const char *fmt, ...`), which cffi cannot
wrap; on x86-64 the first integer arguments of a variadic call travel in the same registers
as fixed ones, so a callback taking five `long`s after the format reads them. Enough for
the `%d`/`%u` lines that say why a client waits (`%s` arguments print as `<s>`).
"""

from __future__ import annotations

import re
import time

from moonlight_python.stream import StreamingSession

_SPEC = re.compile(r"%[-0-9.]*[lhz]*[dusxXp%]")


class LoggingSession(StreamingSession):
    def __init__(self) -> None:
        super().__init__()
        self.log: list[tuple[float, str]] = []  # (monotonic time, line)

    def _make_connection_callbacks(self):
        cl = super()._make_connection_callbacks()
        ffi = self._ffi

        @ffi.callback("void(char *, long, long, long, long, long)")
        def log(fmt, a, b, c, d, e):
            args = iter((a, b, c, d, e))

            def value(m: re.Match) -> str:
                if m.group(0) == "%%":
                    return "%"
                v = next(args, 0)
                if m.group(0).endswith("s"):
                    return "<s>"
                return str(((v & 0xFFFFFFFF) ^ 0x80000000) - 0x80000000)  # as a C int

            text = ffi.string(fmt).decode(errors="replace")
            self.log.append((time.monotonic(), _SPEC.sub(value, text).strip()))

        self._callbacks.append(log)
        cl.logMessage = ffi.cast(ffi.typeof(cl.logMessage), log)
        return cl
