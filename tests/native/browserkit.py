"""Shared pieces of the native browser tests: Debian's headless Chromium and polling helpers."""

from __future__ import annotations

import time

from tests.browser import CHROMIUM, PLAYER_ARGS

ARGS = PLAYER_ARGS
__all__ = ["ARGS", "CHROMIUM", "page_wait", "wait_for"]


def wait_for(fn, timeout=30.0, interval=0.2, what="condition"):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = fn()
        if value:
            return value
        time.sleep(interval)
    raise AssertionError(f"timed out waiting for {what}")


def page_wait(page, js: str, timeout: float) -> None:
    """Poll with evaluate: the page's CSP forbids the eval that wait_for_function uses."""
    try:
        wait_for(lambda: page.evaluate(js), timeout=timeout, interval=0.1, what=js)
    except AssertionError:
        raise AssertionError(f"{js} never held; page says: {page.inner_text('#status')}") from None
