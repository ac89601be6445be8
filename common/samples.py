"""Per-frame figures of a stream (encode time, capture time, RTT) in bounded memory.

A stream appends one value per frame for as long as it runs, for hours: a list of them grew
about 7 MB an hour at 60 fps (bench/soak.py). What the host reads back is the count and the sum
(the history record's averages), the last value, and the values since a cursor a second or so
ago (live statistics); so those are what this keeps, plus the last `keep` values.
"""

from __future__ import annotations

from collections import deque
from itertools import islice

KEEP = 4096  # about a minute at 60 fps: every reader is seconds behind at most


class Samples:
    __slots__ = ("count", "total", "_recent")

    def __init__(self, keep: int = KEEP):
        self.count = 0  # every value ever appended; also the absolute index of the next one
        self.total = 0.0
        self._recent: deque = deque(maxlen=keep)

    def append(self, value: float) -> None:
        self.count += 1
        self.total += value
        self._recent.append(value)

    def __len__(self) -> int:
        return self.count

    @property
    def last(self):
        return self._recent[-1] if self._recent else None

    @property
    def first(self) -> int:
        """The absolute index of the oldest value still held."""
        return self.count - len(self._recent)

    def at(self, index: int):
        """The value at absolute `index`, or None once it has left the window."""
        offset = index - self.first
        if 0 <= offset < len(self._recent):
            return self._recent[offset]
        return None

    def since(self, index: int) -> list:
        """The values from absolute `index` on that are still held."""
        return list(islice(self._recent, max(0, index - self.first), None))

    def values(self) -> list:
        """The values still held, oldest first."""
        return list(self._recent)

    def tally(self) -> tuple[int, float]:
        return self.count, self.total
