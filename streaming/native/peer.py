"""One native session, in its own process: `python -m streaming.native.peer`.

Reads the offer record (JSON line) on stdin, acquires a virtual display at the asked mode,
opens the session's sound sink, launches the chosen app into both (streaming.native.launch),
starts the encoder process, answers (JSON line on stdout) and then runs the aiortc peer
connection until the browser leaves, the app exits, the device is unpaired or disabled (polled
every second), the host process that started it dies, or SIGTERM. Every exit path ends the app
(and its prep undo), releases the display, the sink and the encoder process and emits the
closing events.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import signal
import sys
import time

log = logging.getLogger("streaming.native.peer")

MAX_MESSAGE = 1024  # bytes per data-channel message; more is dropped
CONNECT_TIMEOUT_S = 30
# A connection that closes after the browser has sent nothing for this long was not closed by
# the browser (that comes with its RTCP still flowing) but given up on: ICE consent expired
# (aioice: about 30 s without an answer), i.e. the peer vanished -> reason `timeout`.
SILENT_S = 5.0


def django_now():
    from django.utils import timezone

    return timezone.now()


def _reply(obj: dict) -> None:
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()
    sys.stdout.close()


def _allow_loopback_candidates() -> None:
    """aioice skips 127.0.0.1; a browser on the same machine needs it (issue 10)."""
    from aioice import ice

    original = ice.get_host_addresses

    def with_loopback(use_ipv4: bool, use_ipv6: bool) -> list[str]:
        found = original(use_ipv4, use_ipv6)
        return (["127.0.0.1"] + found) if use_ipv4 else found

    ice.get_host_addresses = with_loopback


class Session:
    def __init__(self, offer: dict):
        self.offer = offer
        self.fp = offer["fingerprint"]
        self.name = offer["name"]
        self.width, self.height, self.fps = offer["width"], offer["height"], offer["fps"]
        self.mode = f"{self.width}x{self.height}@{self.fps}"
        self.display = None
        self.encoder = None
        self.pc = None
        self.track = None
        self.ws = None  # wsvideo.WsVideo in the WebCodecs mode
        self.video = None  # whichever of track / ws carries the frames (for the figures)
        self.audio = None
        self.app = None
        self.closed = False
        self.samples: list[dict] = []
        self.t_start = None
        self.xinput = None
        self.pads = None
        self.done = asyncio.Event()
        # `reason` is the event's vocabulary (quit | timeout | error); `detail` tells the page.
        self.reason = "quit"
        self.detail = "quit"
        # What the game's lifecycle hears (session_play.CLOSE_REASONS close it; a vanished
        # peer leaves it to the session settings): see `stop`.
        self.end_reason, self.deliberate = "client", False
        self.connected = False
        self.channel = None
        # When the browser last sent anything on the transport (RTCP reports, SCTP, DTLS).
        self.rx_packets, self.rx_at = 0, time.monotonic()

    # -- events ------------------------------------------------------------------------------
    def _emit(self, kind: str, **extra) -> None:
        from hooks.events import emit

        client = {"name": self.name, "fingerprint": self.fp, "plane": "native"}
        session = {"id": os.getpid(), "client": self.name, "mode": self.mode, "hdr": False}
        stream = {
            "mode": self.mode,
            "hdr": False,
            "client": self.name,
            "app": self.offer.get("app") or "desktop",
            "plane": "native",
        }
        domain = kind.split(".")[0]
        payload = {"client": client, "session": session, "stream": stream}[domain]
        emit(kind, {domain: payload, **extra})

    def stop(self, end_reason: str, deliberate: bool, detail: str) -> None:
        """End the session (the first cause wins)."""
        if not self.done.is_set():
            self.end_reason, self.deliberate, self.detail = end_reason, deliberate, detail
            self.done.set()

    # -- lifecycle ---------------------------------------------------------------------------
    async def start(self) -> dict:
        from aiortc import RTCConfiguration, RTCPeerConnection, RTCSessionDescription
        from aiortc.rtcrtpsender import RTCRtpSender

        from hostmgmt.config import store
        from streaming import session_play
        from streaming.displays import machine
        from streaming.native import launch, sound
        from streaming.native.media import EncodedVideoTrack, EncoderProcess

        choice = await asyncio.to_thread(launch.resolve, self.offer.get("app") or "desktop")
        if choice is None:
            raise LookupError("that app is no longer in the catalog or library")
        self.display = await asyncio.to_thread(machine.acquire, self.name, self.mode)
        x_display = self.display["x_display"]
        values = await asyncio.to_thread(store.values)
        capture = await asyncio.to_thread(sound.open_capture, values, f"native{os.getpid()}")
        self.audio = sound.OpusTrack(capture, values)
        self.app = launch.AppRun(choice, os.getpid(), self.name)
        client = {"name": self.name, "fingerprint": self.fp, "uuid": ""}
        await asyncio.to_thread(
            self.app.start,
            x_display,
            capture.app_env() if capture else {},
            client,
            (self.width, self.height, self.fps),
        )
        # The client profile and the app's encoder-preset apply as on the compat plane.
        limits = await asyncio.to_thread(session_play.launch_limits, self.name, choice.raw)
        kbps = int(self.offer.get("kbps", 12_000))
        if limits["max_bitrate_kbps"]:
            kbps = min(kbps, limits["max_bitrate_kbps"])
        self.encoder = EncoderProcess(
            x_display, self.width, self.height, self.fps, kbps, limits["encoder_preset"],
            region=self.display.get("region"),
        )  # fmt: skip
        self.pc = RTCPeerConnection(RTCConfiguration(iceServers=[]))
        webcodecs = self.offer.get("transport") == "webcodecs"
        self.track = EncodedVideoTrack(self.encoder, feed=not webcodecs)
        self.video = self.track
        if webcodecs:
            from streaming.native.wsvideo import WsVideo

            self.ws = self.video = WsVideo(self.encoder)
            await self.ws.start()
        # Track and codec preferences before setRemoteDescription, or aiortc falls back to VP8.
        transceiver = self.pc.addTransceiver(self.track, direction="sendonly")
        h264 = [
            c
            for c in RTCRtpSender.getCapabilities("video").codecs
            if c.mimeType in ("video/H264", "video/rtx")
        ]
        transceiver.setCodecPreferences(h264)
        transceiver.sender._send_keyframe = self.track.request_keyframe
        self.pc.addTransceiver(self.audio, direction="sendonly")

        @self.pc.on("datachannel")
        def on_channel(channel):
            self.channel = channel
            channel.on("message", self.on_input)
            if self.ws is not None:  # only this DTLS-proven device learns the video token
                channel.send(json.dumps({"t": "ws", "token": self.ws.token}))

        @self.pc.on("connectionstatechange")
        async def on_state():
            state = self.pc.connectionState
            log.info("native %s: %s", self.fp[:12], state)
            if state == "connected" and not self.connected:
                self.connected = True
                self.t_start = django_now()
                self.rx_at = time.monotonic()
                self.track.request_keyframe()
                self._emit("client.connected")
                self._emit("session.started")
                self._emit("stream.started")
            elif state in ("failed", "closed"):
                if not self.done.is_set():
                    silent = time.monotonic() - self.rx_at > SILENT_S
                    # closed by the browser: quit; gone silent (consent expired): timeout
                    self.reason = "error" if state == "failed" else "timeout" if silent else "quit"
                self.stop("client", False, state)  # vanished: the session settings decide

        await self.pc.setRemoteDescription(RTCSessionDescription(self.offer["sdp"], "offer"))
        if transceiver.mid is None:
            raise ValueError("the offer has no video to receive")
        codecs = [c.mimeType for c in transceiver._codecs]
        if not codecs or codecs[0] != "video/H264":
            raise ValueError("the browser offered no H.264 (constrained baseline)")
        await self.pc.setLocalDescription(await self.pc.createAnswer())
        return {
            "sdp": self.pc.localDescription.sdp,
            "type": "answer",
            "x_display": x_display,
            "audio_sink": capture.sink_name if capture else None,
            "mode": self.mode,
            "pid": os.getpid(),
        }

    def on_input(self, message) -> None:
        if isinstance(message, bytes) or len(message) > MAX_MESSAGE:
            return
        try:
            ev = json.loads(message)
        except ValueError:
            return
        if not isinstance(ev, dict):
            return
        if ev.get("t") == "ping":  # input echo for the latency figure
            self.channel.send(json.dumps({"t": "pong", "c": ev.get("c")}))
            return
        if ev.get("t") == "stop":  # the player pressed Stop: a deliberate end
            self.stop("cancel", True, "stopped by the player")
            return
        if ev.get("t") == "kf":  # the WebCodecs page skipped to catch up: it needs an IDR
            self.encoder.keyframe.set()
            return
        from streaming.native.inputs import Pads, inject

        if self.pads is None:
            self.pads = Pads()
        if self.xinput is None and ev.get("t") != "p":
            from streaming.input.xtest import InputUnavailable, XInput

            try:
                self.xinput = XInput(self.display["x_display"], region=self.display.get("region"))
            except InputUnavailable as exc:
                log.warning("input unavailable: %s", exc)
                return
        inject(self.xinput, ev, self.pads)

    async def watch(self) -> None:
        from streaming.native import services

        parent = int(os.environ.get("NATIVE_PARENT_PID", "0") or 0)
        started = time.monotonic()
        last_stats = 0.0
        while not self.done.is_set():
            try:
                await asyncio.wait_for(self.done.wait(), 1.0)
                break
            except TimeoutError:
                pass
            if not await asyncio.to_thread(services.authorized, self.fp):
                self.stop("unpaired", True, "unpaired or disabled")
            elif parent and os.getppid() != parent:
                self.stop("host_shutdown", True, "host exited")
            elif not self.connected and time.monotonic() - started > CONNECT_TIMEOUT_S:
                self.reason = "timeout"
                self.stop("arm_timeout", False, "timeout")
            elif self.app is not None and await asyncio.to_thread(self.app.exited):
                self.stop("app_exited", True, "the app exited")
            if self.done.is_set():
                break
            if self.connected:
                last_stats = await self._sample(last_stats)

    async def _rtt_ms(self) -> float | None:
        """The video sender's RTT from the browser's RTCP receiver reports (LSR/DLSR); notes
        when the browser was last heard from, on the way."""
        try:
            report = await self.pc.getStats()
        except Exception:  # noqa: BLE001 - closing under us
            return None
        received = sum(s.packetsReceived for s in report.values() if s.type == "transport")
        if received != self.rx_packets:
            self.rx_packets, self.rx_at = received, time.monotonic()
        for s in report.values():
            if s.type == "remote-inbound-rtp" and s.kind == "video" and s.roundTripTime:
                return round(s.roundTripTime * 1000, 2)
        return None

    async def _sample(self, last: float) -> float:
        """One second's figures: to the page's overlay and into the history record."""
        rtt = await self._rtt_ms()
        now = time.monotonic()
        frames, nbytes = self.video.frames, self.video.bytes
        if last:
            dt = now - last
            sample = {
                "t": len(self.samples),
                "fps": round((frames - self._f) / dt, 1),
                "bitrate_kbps": round((nbytes - self._b) * 8 / dt / 1000),
                "encode_ms": round(self.video.encode_ms, 2),
                "rtt_ms": rtt,
                "audio_packets": self.audio.packets,
            }
            self.samples.append(sample)
            if self.channel is not None and self.channel.readyState == "open":
                # `t` last: the sample's own `t` (its index) must not hide the message type.
                overlay = {**sample, "t": "stats", "kbps": sample["bitrate_kbps"]}
                self.channel.send(json.dumps(overlay))
        self._f, self._b = frames, nbytes
        return now

    def _record(self) -> None:
        from django.utils import timezone

        from streaming import history

        n = len(self.samples) or 1
        rtts = [x["rtt_ms"] for x in self.samples if x.get("rtt_ms") is not None]
        history.record_session(
            t_start=self.t_start,
            t_end=timezone.now(),
            app_name=self.offer.get("app_title") or "Desktop",
            client_name=self.name,
            codec="h264",
            width=self.width,
            height=self.height,
            fps=self.fps,
            avg_bitrate_kbps=round(sum(x["bitrate_kbps"] for x in self.samples) / n),
            avg_encode_ms=round(sum(x["encode_ms"] for x in self.samples) / n, 2),
            avg_rtt_ms=round(sum(rtts) / len(rtts), 2) if rtts else None,
            plane="native",
            client_fingerprint=self.fp,
            samples=self.samples,
        )

    async def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        from streaming.displays import machine
        from streaming.native import sessions

        if self.channel is not None and self.channel.readyState == "open":
            try:
                self.channel.send(json.dumps({"t": "bye", "reason": self.detail}))
                await asyncio.sleep(0.1)
            except Exception:  # noqa: BLE001 - leaving anyway
                pass
        if self.pc is not None:
            await self.pc.close()
        if self.ws is not None:
            await self.ws.close()
        if self.encoder is not None:
            await asyncio.to_thread(self.encoder.close)
        if self.audio is not None:
            await asyncio.to_thread(self.audio.close)
        if self.app is not None:
            try:
                await asyncio.to_thread(self.app.end, self.end_reason, self.deliberate)
            except Exception:  # noqa: BLE001 - the display must still be released
                log.exception("ending the app failed")
        if self.xinput is not None:
            self.xinput.release_all()
            self.xinput.close()
        if self.pads is not None:
            self.pads.close()
        if self.display is not None:
            try:
                await asyncio.to_thread(machine.disconnect, self.display["slot"], self.deliberate)
            except Exception:  # noqa: BLE001 - the display may be gone already
                log.exception("display release failed")
        await asyncio.to_thread(sessions.unregister, self.fp, os.getpid())
        if self.connected:
            try:
                await asyncio.to_thread(self._record)
            except Exception:  # noqa: BLE001 - the history is a nicety; the events still go out
                log.exception("history record failed")
            self._emit("stream.stopped")
            self._emit("session.ended")
            self._emit("client.disconnected", reason=self.reason)


async def run(offer: dict) -> int:
    from streaming.native import sessions

    session = Session(offer)
    loop = asyncio.get_running_loop()
    # SIGTERM: the host ends it (DELETE /session, unpair); SIGUSR1: a reconnect replaces it.
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, session.stop, "api", True, "ended by the host")
    loop.add_signal_handler(signal.SIGUSR1, session.stop, "client", False, "reconnected")
    try:
        try:
            answer = await session.start()
        except Exception as exc:  # noqa: BLE001 - becomes the offer's error answer
            status = getattr(exc, "status", 400 if isinstance(exc, ValueError) else 500)
            status = 404 if isinstance(exc, LookupError) else status
            log.warning("native session refused: %s", exc)
            session.stop("released", True, str(exc))  # a game it started is closed
            await session.close()  # release first: the caller may look right after the answer
            _reply({"error": str(exc), "status": status})
            return 1
        await asyncio.to_thread(
            sessions.register,
            session.fp,
            {
                "pid": os.getpid(),
                "name": session.name,
                "mode": session.mode,
                "app": offer.get("app") or "desktop",
                "app_title": offer.get("app_title") or "Desktop",
                "app_pid": session.app.pid if session.app else None,
                "audio_sink": answer.get("audio_sink"),
                "transport": offer.get("transport") or "webrtc",
                "ws_token": session.ws.token if session.ws else None,
                "ws_sock": session.ws.path if session.ws else None,
                "x_display": answer["x_display"],
                "slot": session.display["slot"],
                "started_unix": int(time.time()),
            },
        )
        _reply(answer)
        await session.watch()
        return 0
    finally:
        await session.close()


def main() -> int:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s native-peer %(message)s")
    offer = json.loads(sys.stdin.readline())
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "hostmgmt.settings")
    import django

    django.setup()
    if offer.get("loopback"):
        _allow_loopback_candidates()
    return asyncio.run(run(offer))


if __name__ == "__main__":
    sys.exit(main())
