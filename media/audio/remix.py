"""Between the session sink's layout and the stream's: when a client's ANNOUNCE asks for
another channel count than the sink was made with (a /resume from another client, a client
that asked /launch for 5.1 and announces stereo), the sound is converted, not refused.

* More to fewer (a downmix) with the ITU-R BS.775 coefficients: centre and surrounds at
  -3 dB (0.7071) into the fronts; 7.1 to 5.1 folds each side into its rear at -3 dB with the
  rear at -3 dB too. LFE is left out, as BS.775 does. Each output row is then scaled so its
  coefficients sum to at most 1 (FFmpeg's swresample normalises the same way), so a loud mix
  never clips: a downmix is quieter than its loudest channel, never distorted.
* Fewer to more (an upmix) puts each channel on its own name (stereo on FL/FR, 5.1 on the 5.1
  channels of 7.1) and leaves the others silent: nothing is synthesised.

Channel order is the client's (`media.audio.layouts`): FL FR C LFE RL RR SL SR.
"""

from __future__ import annotations

import numpy as np

_H = 0.70710677  # -3 dB

# Rows: output channels; columns: input channels (client order).
_DOWN = {
    (6, 2): [
        [1, 0, _H, 0, _H, 0],
        [0, 1, _H, 0, 0, _H],
    ],
    (8, 2): [
        [1, 0, _H, 0, _H, 0, _H, 0],
        [0, 1, _H, 0, 0, _H, 0, _H],
    ],
    (8, 6): [
        [1, 0, 0, 0, 0, 0, 0, 0],
        [0, 1, 0, 0, 0, 0, 0, 0],
        [0, 0, 1, 0, 0, 0, 0, 0],
        [0, 0, 0, 1, 0, 0, 0, 0],
        [0, 0, 0, 0, _H, 0, _H, 0],
        [0, 0, 0, 0, 0, _H, 0, _H],
    ],
}


def matrix(src: int, dst: int) -> np.ndarray:
    """The (dst, src) float32 matrix that takes `src` channels to `dst` channels."""
    if src == dst:
        return np.eye(src, dtype=np.float32)
    if src < dst:  # upmix: each channel to its own place, the rest silent
        m = np.zeros((dst, src), dtype=np.float32)
        m[np.arange(src), np.arange(src)] = 1.0
        return m
    try:
        m = np.array(_DOWN[(src, dst)], dtype=np.float32)
    except KeyError:
        raise ValueError(f"no downmix from {src} to {dst} channels") from None
    sums = m.sum(axis=1, keepdims=True)
    return m / np.maximum(sums, 1.0)


class Remix:
    """Converts (frames, src) blocks to (frames, dst); the same dtype back."""

    def __init__(self, src: int, dst: int):
        self.src, self.dst = src, dst
        self._m = matrix(src, dst).T.copy()  # (src, dst): block @ m

    @property
    def identity(self) -> bool:
        return self.src == self.dst

    def __call__(self, block: np.ndarray) -> np.ndarray:
        if self.identity:
            return block
        if block.dtype == np.int16:
            y = block.astype(np.float32) @ self._m
            return np.clip(np.rint(y), -32768, 32767).astype(np.int16)
        return (np.asarray(block, dtype=np.float32) @ self._m).astype(np.float32, copy=False)
