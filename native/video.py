"""A native session's video: the encoder child (`native.media.EncoderProcess`) at the
session's mode and what carries its frames to the browser: the WebRTC track, and in the
WebCodecs mode the WebSocket relay (`native.wsvideo`)."""

from __future__ import annotations

from native.media import EncodedVideoTrack, EncoderProcess
from native.wsvideo import WsVideo


async def open_video(display, mode: tuple, kbps: int, preset: int, plan, codec: str,
                     webcodecs: bool):  # fmt: skip
    """The encoder child at the session's mode (`plan`'s encoders for `codec`) and what
    carries its frames: (encoder, the WebRTC track, the WebSocket relay or None). In the
    WebCodecs mode the relay takes the frames and the track's RTP video stays idle."""
    width, height, fps = mode
    encoder = EncoderProcess(display, width, height, fps, kbps, preset,
                             candidates=plan.encoders.get(codec), config=plan.config)  # fmt: skip
    track = EncodedVideoTrack(encoder, feed=not webcodecs)
    ws = None
    if webcodecs:
        ws = WsVideo(encoder)
        await ws.start()
    return encoder, track, ws
