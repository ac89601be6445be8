"""Fixtures of the plugin tests: the event bus on a real Redis and a fresh state dir."""

from __future__ import annotations

import pytest


@pytest.fixture
def bus(redis_db, tmp_path, monkeypatch):
    from hooks import events, hook_config

    monkeypatch.setenv("HOST_STATE_DIR", str(tmp_path))
    hook_config._cache.invalidate()
    yield events
    hook_config._cache.invalidate()


def changed(bus) -> list[str]:
    """The ids of every plugins.changed in the ring, oldest first."""
    return [e["id"] for e in bus.ring_events() if e["kind"] == "plugins.changed"]
