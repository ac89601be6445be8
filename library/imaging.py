"""Image checks and conversions with OpenCV: decode to prove a file is an image, re-encode.

Decoding is the validation: a ZIP named `.png` or any other non-image fails here, so nothing
that reaches the covers dir or an art response is anything but pixels we produced or checked.
"""

from __future__ import annotations

import os
from functools import cache
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
JPEG_SIGNATURE = b"\xff\xd8\xff"
MAX_SIDE = 8192


@cache
def _libs():
    """OpenCV and numpy, imported on first use: every host process loads this module through
    the library app, and OpenCV's import alone costs a second of each one's start."""
    # Bound what a small compressed body may inflate to before OpenCV reads its first image.
    os.environ.setdefault("OPENCV_IO_MAX_IMAGE_PIXELS", str(8192 * 8192))
    import cv2  # heavy: see the docstring
    import numpy  # heavy: see the docstring

    return cv2, numpy


class NotAnImage(ValueError):
    """The bytes do not decode as an image OpenCV knows."""


def decode(data: bytes) -> np.ndarray:
    cv2, np = _libs()
    if not data:
        raise NotAnImage("empty image")
    buf = np.frombuffer(data, dtype=np.uint8)
    try:
        img = cv2.imdecode(buf, cv2.IMREAD_UNCHANGED)
    except cv2.error:
        img = None
    if img is None or img.size == 0:
        raise NotAnImage("not a decodable image")
    if img.shape[0] > MAX_SIDE or img.shape[1] > MAX_SIDE:
        raise NotAnImage(f"image larger than {MAX_SIDE}x{MAX_SIDE}")
    return img


def _bgr(img: np.ndarray) -> np.ndarray:
    """Drop alpha over black and widen grey so the JPEG encoder gets plain BGR."""
    cv2, np = _libs()
    if img.dtype != np.uint8:
        img = cv2.convertScaleAbs(img, alpha=255.0 / max(float(img.max()), 1.0))
    if img.ndim == 2:
        return cv2.cvtColor(img, cv2.COLOR_GRAY2BGR)
    if img.shape[2] == 4:
        alpha = img[:, :, 3:4].astype(np.float32) / 255.0
        return (img[:, :, :3].astype(np.float32) * alpha).astype(np.uint8)
    return img


def to_jpeg(data: bytes, quality: int = 90) -> bytes:
    """JPEG bytes of any image; a JPEG that decodes is passed through untouched."""
    cv2, np = _libs()
    img = decode(data)
    if data.startswith(JPEG_SIGNATURE):
        return data
    ok, out = cv2.imencode(".jpg", _bgr(img), [cv2.IMWRITE_JPEG_QUALITY, quality])
    if not ok:
        raise NotAnImage("could not encode JPEG")
    return out.tobytes()


def to_png(data: bytes) -> bytes:
    """PNG bytes re-encoded from the decoded pixels (never the caller's bytes)."""
    cv2, np = _libs()
    img = decode(data)
    if img.dtype != np.uint8 and img.dtype != np.uint16:
        img = _bgr(img)
    ok, out = cv2.imencode(".png", img)
    if not ok:
        raise NotAnImage("could not encode PNG")
    return out.tobytes()


def is_valid_png(data: bytes) -> bool:
    if not data.startswith(PNG_SIGNATURE):
        return False
    try:
        decode(data)
    except NotAnImage:
        return False
    return True


def box_png(width: int = 300, height: int = 400) -> bytes:
    """The default box art for catalog apps without their own image."""
    cv2, np = _libs()
    img = np.full((height, width, 3), (48, 40, 32), dtype=np.uint8)
    cv2.rectangle(img, (12, 12), (width - 13, height - 13), (160, 150, 140), 2)
    ok, out = cv2.imencode(".png", img)
    assert ok
    return out.tobytes()
