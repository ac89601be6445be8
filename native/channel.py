"""The page's data channel on the native plane: what the page sends (input, clipboard, the
latency ping, Stop, a keyframe ask) and what the host tells it once (the video token, the
clipboard's mode). Functions of the live `native.peer.NativePeer`."""

from __future__ import annotations

import json
import logging

from media.input.xtest import InputUnavailable, XInput
from native.inputs import Pads, inject
from streaming.session_display import input_at_start

log = logging.getLogger("native.peer")

MAX_MESSAGE = 1024  # bytes per data-channel message; more is dropped
# A clipboard message (native/clipboard.py) carries up to 64 KiB of text, JSON-escaped.
MAX_CLIP_MESSAGE = 2 * 64 * 1024 + 64


def is_open(peer) -> bool:
    return peer.channel is not None and peer.channel.readyState == "open"


def send(peer, msg: dict) -> None:
    if is_open(peer):
        peer.channel.send(json.dumps(msg, ensure_ascii=False))


def tell_ws_token(peer) -> None:
    """Only this DTLS-proven device learns the video token, once both exist."""
    if peer.ws is None or peer.ws_told or not is_open(peer):
        return
    peer.channel.send(json.dumps({"t": "ws", "token": peer.ws.token, "codec": peer.codec}))
    peer.ws_told = True


def tell_clipboard(peer) -> None:
    """Once live with the channel open: whether the clipboard is shared (or why not)."""
    clip = peer.clipboard
    if clip is None or clip.told or not peer.connected or not is_open(peer):
        return
    send(peer, clip.hello())
    clip.told = True


def on_message(peer, message) -> None:
    if isinstance(message, bytes) or len(message) > MAX_CLIP_MESSAGE:
        return
    try:
        ev = json.loads(message)
    except ValueError:
        return
    if not isinstance(ev, dict):
        return
    if ev.get("t") == "clip":
        if peer.clipboard is None or not peer.connected:
            peer.clips_dropped += 1  # `clipboard = off`: the host takes nothing
        else:
            peer.clipboard.from_page(ev)
        return
    if len(message) > MAX_MESSAGE:
        return
    if ev.get("t") == "ping":  # input echo for the latency figure
        peer.channel.send(json.dumps({"t": "pong", "c": ev.get("c")}))
        return
    if ev.get("t") == "stop":  # the player pressed Stop: a deliberate end
        peer.stop("cancel", True, "stopped by the player")
        return
    if not peer.connected:  # not proven and started yet: there is nothing to drive
        return
    if ev.get("t") == "kf":  # the WebCodecs page skipped to catch up: it needs an IDR
        peer.encoder.keyframe.set()
        return
    if peer.pads is None:
        peer.pads = Pads()
    if peer.xinput is None and ev.get("t") != "p":
        if input_at_start(peer.display):
            return  # the compositor has no virtual keyboard/pointer (logged at start)
        try:
            peer.xinput = XInput(peer.display["x_display"], region=peer.display.get("region"))
        except InputUnavailable as exc:
            log.warning("input unavailable: %s", exc)
            return
    inject(peer.xinput, ev, peer.pads)
