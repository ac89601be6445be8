"""Game lifecycle: find a launched title's own process and report when it runs and ends."""

from games.detect import DetectHints, Found, scan
from games.watcher import GameEvent, GameWatcher

__all__ = ["DetectHints", "Found", "GameEvent", "GameWatcher", "scan"]
