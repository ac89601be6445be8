"""The native plane's session: its transport (the aiortc peer connection, or WebCodecs over
the WebSocket relay) and its admission (the offer, then the DTLS proof) around the one session
lifecycle (`streaming.sessions.lifecycle.SessionCore`). Runs in its own session process
(forked by the session manager, `streaming.sessions.process.run`).

Gets the offer record and answers (a JSON line on stdout, the requester's connection) at once,
having changed nothing on the host. Only when the DTLS handshake has completed with the certificate
whose fingerprint the offer claimed (the device's identity) does it end this device's previous
session, acquire a virtual display at the asked mode, open the session's sound sink, launch
the chosen app into both (`streaming.sessions.apps`) and start the encoder process. Why that
order: the offer names the fingerprint in plain text, so anyone can copy a paired device's;
only the handshake proves the key behind it. Then it runs the peer connection until the
browser leaves or the shared watch (`streaming.sessions.watch`) finds an end; every exit
path releases its media and ends through `SessionCore.finish`.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import signal

from common import realtime
from hostconfig import store
from media.encoder import EncoderFailed
from native import channel as page
from native import clipboard, inputs, rtc, services
from native.figures import Figures
from native.media import use_playout_delay
from native.sound import OpusTrack
from native.video import open_video
from streaming import session_display, session_play
from streaming.sessions import admission, apps, encoding, registry, sound
from streaming.sessions.lifecycle import SessionCore
from streaming.sessions.process import reply
from streaming.sessions.watch import End, Watch, disconnect_reason

log = logging.getLogger("native.peer")

ENCODER_OPEN_S = 15.0  # the encoder process's start and its first encoder opening
CONNECT_TIMEOUT_S = 30


class _Ended(Exception):
    """The session ended while it was still starting."""


class NativePeer:
    """One native session: the peer connection and media on a SessionCore."""

    def __init__(self, offer: dict):
        self.offer = offer
        self.fp = offer["fingerprint"]
        self.name = offer["name"]
        self.width, self.height, self.fps = offer["width"], offer["height"], offer["fps"]
        self.mode = f"{self.width}x{self.height}@{self.fps}"
        self.id = registry.new_id()
        self.core = SessionCore("native", self.id, {"name": self.name, "fingerprint": self.fp},
                                self.width, self.height, self.fps,
                                offer.get("app") or "desktop", offer.get("app_title") or "Desktop",
                                remote=offer.get("remote", ""))  # fmt: skip
        self.core.totals = lambda: self.figures.totals(self.video, self.core)
        self.display = None
        self.encoder = None
        self.pc = None
        self.track = None
        self.ws = None  # wsvideo.WsVideo in the WebCodecs mode
        self.video = None  # whichever of track / ws carries the frames (for the figures)
        self.audio = None
        self.app = None
        self.closed = False
        self.registered = False
        self.xinput = None  # XTest, made on first input; a WlrInput made at start on wlroots
        self.pads = None
        self.done = asyncio.Event()
        # `reason` is the event's vocabulary (quit | timeout | error); `detail` tells the page.
        self.reason = "quit"
        self.detail = "quit"
        # What the game's lifecycle hears (watch.CLOSE_REASONS close it; a vanished
        # peer leaves it to the session settings): see `stop`.
        self.end_reason, self.deliberate = "client", False
        self.connected = False
        self.proven = False  # DTLS completed with the claimed certificate
        self.choice = None
        self.codec = "h264"  # WebRTC carries H.264; WebCodecs what the browser decodes too
        self.plan = None  # streaming.sessions.encoding.Plan for `codec`
        self.video_sender = self.audio_sender = None
        self.channel = None
        self.ws_told = False
        self.clipboard = None  # native.clipboard.SessionClipboard; None when `clipboard` is off
        self.clips_dropped = 0  # clip messages the page sent while the clipboard is off
        self.figures = Figures()  # RTCP-derived RTT, loss, when the browser was last heard

    def stop(self, end_reason: str, deliberate: bool, detail: str, disconnect: str = "",
             error: str = "") -> None:  # fmt: skip
        """End the session (the first cause wins). `disconnect`: the `client.disconnected`
        reason when the end reason alone does not tell it (a closed or failed connection)."""
        if not self.done.is_set():
            self.end_reason, self.deliberate, self.detail = end_reason, deliberate, detail
            self.reason = disconnect or disconnect_reason(end_reason)
            self.core.error = error or self.core.error
            self.done.set()

    def end(self, end: End) -> None:
        """An end the shared watch found (`streaming.sessions.watch`)."""
        detail = f"the {self.codec} encoder failed" if end.reason == "encoder_failed" else ""
        self.stop(end.reason, end.deliberate, detail or end.detail, error=end.error)

    # -- lifecycle ---------------------------------------------------------------------------
    async def negotiate(self) -> dict:
        """Answer the offer. Reads the catalog and nothing else: no session is ended, no display,
        sink, prep step or app is touched until `bring_up` has the DTLS proof."""
        use_playout_delay()  # render each frame at once, as WebCodecs does
        self.choice = await asyncio.to_thread(apps.resolve, self.offer.get("app") or "desktop")
        if self.choice is None:
            raise LookupError("that app is no longer in the catalog or library")
        if self.offer.get("transport") == "webcodecs":
            offered = await asyncio.to_thread(encoding.offered_or_h264, self.name)
            self.codec = encoding.pick(offered, self.offer.get("decodes") or ())
            log.info(
                "native %s: %s over WebCodecs (offered %s, the page decodes %s)",
                self.fp[:12], self.codec, ",".join(offered),
                ",".join(self.offer.get("decodes") or ()),
            )  # fmt: skip
        self.plan = await asyncio.to_thread(encoding.plan, [self.codec])
        self.pc, video, self.audio_sender = rtc.sendonly()
        self.video_sender = video.sender

        @self.pc.on("datachannel")
        def on_channel(channel):
            self.channel = channel
            channel.on("message", lambda message: page.on_message(self, message))
            page.tell_ws_token(self)
            page.tell_clipboard(self)

        @self.pc.on("connectionstatechange")
        async def on_state():
            state = self.pc.connectionState
            log.info("native %s: %s", self.fp[:12], state)
            if state in ("failed", "closed"):
                # closed by the browser: quit; gone silent (consent expired): timeout
                silent = self.figures.silent()
                why = "error" if state == "failed" else "timeout" if silent else "quit"
                self.stop("client", False, state, why)  # vanished: the session settings decide

        sdp = await rtc.answer(self.pc, video, self.offer["sdp"])
        return {
            "sdp": sdp,
            "type": "answer",
            "mode": self.mode,
            "codec": self.codec,
            "session_id": self.id,
        }

    async def bring_up(self) -> None:
        """After the answer: wait for the DTLS proof, then take this device's session over and
        start everything. Each step looks at `done` first, so a session ended meanwhile stops
        here and `close` releases what was taken."""
        try:
            proof = await rtc.prove(self.pc, self.fp, self.done)
        except Exception:  # no proof is a refusal, never a pass
            log.exception("native %s: checking the DTLS peer failed", self.fp[:12])
            proof = False
        await asyncio.to_thread(registry.proven, os.getpid())
        if not proof:
            failed = any(t.state == "failed" for t in rtc.transports(self.pc))
            log.warning(
                "native %s: the DTLS peer did not prove the offered fingerprint (%s); "
                "nothing was started",
                self.fp[:12],
                "handshake failed" if failed else f"ended first: {self.detail}",
            )
            self.stop("released", False, "the DTLS certificate does not match the offer", "error")
            return
        self.proven = True
        try:
            await self._start_media()
            self._go_live()  # session.started; the stream's once its encoder has opened
            encoder = await asyncio.to_thread(self.encoder.wait_opened, ENCODER_OPEN_S)
            self.core.stream_began(
                self.codec, encoder, await asyncio.to_thread(encoding.where, encoder)
            )
        except _Ended:
            return
        except EncoderFailed as exc:
            log.warning("native session %s: no encoder: %s", self.fp[:12], exc)
            self.stop(
                "encoder_failed", True, f"no {self.codec} encoder opened here", error=str(exc)
            )
            return
        except Exception as exc:  # the page hears it in the closing "bye"
            log.warning("native session %s failed to start: %s", self.fp[:12], exc)
            self.stop("launch_failed", True, str(exc), error=str(exc))

    def _step(self) -> None:
        if self.done.is_set():
            raise _Ended

    async def _start_media(self) -> None:
        # A reconnect replaces the old session, whose game waits per the session settings
        # (grace) for this one to take it over: let the old peer finish first.
        self._step()
        await asyncio.to_thread(registry.stop_clients, [self.fp], "client", False, 10, "native")
        self._step()
        self.display = await asyncio.to_thread(self.core.acquire_display, self.name, "native")
        x_display = self.display["x_display"]
        if session_display.input_at_start(self.display):
            # Keyboard and pointer before the app: it binds the seat's devices as they appear.
            self.xinput = await asyncio.to_thread(
                session_display.session_input, self.display, self.id
            )
        values = await asyncio.to_thread(store.values)
        self._step()
        loop = asyncio.get_running_loop()
        self.clipboard = await asyncio.to_thread(
            clipboard.SessionClipboard.open,
            values.get("clipboard"),
            self.display,
            lambda msg: loop.call_soon_threadsafe(page.send, self, msg),
        )
        capture = await asyncio.to_thread(sound.open_capture, f"native{self.id}", values)
        self.core.extra.update(sound.record_fields(capture))  # `recover_lost` reads it too
        self.audio = OpusTrack(capture, values)
        self._step()
        app = apps.app_of(self.choice)
        self.app = await asyncio.to_thread(
            self.core.start_app,
            app,
            capture.app_env() if capture else {},
            session_display.map_timeout(),
        )
        self._step()
        # The client profile and the app's encoder-preset apply as on the compat plane.
        limits = await asyncio.to_thread(session_play.launch_limits, self.name, app)
        kbps = int(self.offer.get("kbps", 12_000))
        if limits["max_bitrate_kbps"]:
            kbps = min(kbps, limits["max_bitrate_kbps"])
        webcodecs = self.offer.get("transport") == "webcodecs"
        self.encoder, self.track, self.ws = await open_video(
            self.display, (self.width, self.height, self.fps), kbps, limits["encoder_preset"],
            self.plan, self.codec, webcodecs,
        )  # fmt: skip
        self.video = self.ws if self.ws is not None else self.track
        self.video_sender.replaceTrack(self.track)
        self.video_sender._send_keyframe = self.track.request_keyframe
        self.audio_sender.replaceTrack(self.audio)
        self._step()
        self.core.state = "streaming"
        await asyncio.to_thread(
            self.core.publish,
            app_pid=self.app.pid,
            transport=self.offer.get("transport") or "webrtc",
            ws_token=self.ws.token if self.ws else None,
            ws_sock=self.ws.path if self.ws else None,
            x_display=x_display,
            slot=self.display["slot"],
        )
        self.registered = True
        page.tell_ws_token(self)

    def _go_live(self) -> None:
        self.connected = True
        self.figures.heard()
        self.track.request_keyframe()
        self.core.emit("client.connected")
        self.core.began()
        page.tell_clipboard(self)

    async def watch(self) -> None:
        """Until the session ends: the shared watch's checks once a second (blocking: in a
        worker thread), the heartbeat once registered, and the second's figures."""
        watcher = Watch(self.id, self.fp, CONNECT_TIMEOUT_S, authorized=services.authorized)
        while not self.done.is_set():
            try:
                await asyncio.wait_for(self.done.wait(), 1.0)
                break
            except TimeoutError:
                pass
            end = await asyncio.to_thread(
                watcher.tick, connected=self.proven, display=self.display, app=self.app,
                capture_lost=self._capture_lost(),
                encoder_failure=self.encoder.failure() if self.encoder is not None else "",
                publish=self.core.publish if self.registered else None,
            )  # fmt: skip
            if end is not None:
                self.end(end)
            if self.done.is_set():
                break
            if self.connected:
                await self.figures.second(self)

    def _capture_lost(self) -> str:
        """The capture that stopped answering (the encoder child reads it), else ""."""
        if self.display is None or self.encoder is None or not self.encoder.lost.is_set():
            return ""
        return session_display.open_capture(self.display).what

    async def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        if self.channel is not None and self.channel.readyState == "open":
            try:
                self.channel.send(json.dumps({"t": "bye", "reason": self.detail}))
                await asyncio.sleep(0.1)
            except Exception:  # leaving anyway
                pass
        if self.pc is not None:
            await self.pc.close()
        if self.ws is not None:
            await self.ws.close()
        if self.encoder is not None:
            await asyncio.to_thread(self.encoder.close)
        if self.audio is not None:
            await asyncio.to_thread(self.audio.close)
        inputs.release(self.xinput, self.pads)
        if self.clipboard is not None:
            await asyncio.to_thread(self.clipboard.close)
        # The stream's record (a database write: not from the event loop), the game, its
        # group and undo steps, the display, `stream.end`, session.ended: the core's.
        await asyncio.to_thread(self.core.finish, self.end_reason, self.deliberate)
        if self.connected:
            self.core.emit("client.disconnected", reason=self.reason)
        await asyncio.to_thread(admission.leave, "native", self.id, os.getpid())


async def run(offer: dict) -> int:
    session = NativePeer(offer)
    # The offer's place (admission) is this process's now, until it exits.
    await asyncio.to_thread(admission.take, "native", offer, os.getpid())
    loop = asyncio.get_running_loop()
    # SIGTERM: the host stops (or ends an unproven peer); registered sessions are ended
    # through their registry control list (`watch`).
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, session.stop, "host_shutdown", False, "ended by the host")
    try:
        try:
            answer = await session.negotiate()
        except Exception as exc:  # becomes the offer's error answer
            status = getattr(exc, "status", 400 if isinstance(exc, ValueError) else 500)
            status = 404 if isinstance(exc, LookupError) else status
            log.warning("native session refused: %s", exc)
            session.stop("released", True, str(exc))
            await session.close()
            reply({"error": str(exc), "status": status})
            return 1
        reply(answer)
        bring_up = asyncio.create_task(session.bring_up())
        await session.watch()
        await bring_up  # it stops at its next step now that the session is done
        return 0
    finally:
        await session.close()


def main(offer: dict) -> int:
    """The session process's body (`streaming.sessions.process.run`)."""
    if offer.get("loopback"):
        rtc.allow_loopback_candidates()
    realtime.prepare()
    realtime.promote("the native session's event loop (RTP sender)")
    return asyncio.run(run(offer))
