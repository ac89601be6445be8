"""The compat plane's session: its transport (RTSP, ENet control, RTP video and audio through
`compat.engine.stream.StreamSession`) and its admission (the /launch claim) around the one
session lifecycle (`streaming.sessions.lifecycle.SessionCore`). Runs in its own session process
(forked by the session manager, `streaming.sessions.process.run`).

Order, and why: the display first (the app and the capture need it), then prep `do` steps and
the app (the client should see the app when the picture starts), then the StreamSession binds
the fixed stream ports; only then is /launch answered (through `services.report`), so the
client's RTSP connection never races the listener. The process's main thread then watches:
requests from other processes (stop, resume), the app exiting, the client never connecting,
the stream ending; and publishes the heartbeat, live statistics and per-second samples.

The end runs in reverse whatever happened (`SessionCore.finish`): stream stopped, the title
closed or left to the session settings (else the app group terminated), `undo` steps in
reverse, the display handed back to its policy (`disconnect`, deliberate for operator and
client stops), the history record and the end events.
"""

from __future__ import annotations

import contextlib
import logging
import signal
import threading
import time

from compat.codecs import Offer
from compat.engine import adaptive
from compat.engine.session import StreamSession
from compat.launchconfig import make_launch
from media.framesource import DisplayCapture, WaylandCapture
from streaming import services, session_display, session_play
from streaming.sessions import apps, encoding, sound
from streaming.sessions.lifecycle import SessionCore
from streaming.sessions.watch import CLIENT_REASONS, SHUTDOWN, End, Watch, disconnect_reason

log = logging.getLogger("streaming.sessions")

ARM_TIMEOUT_S = 20.0  # /launch answered, but no client connected the control stream
TICK_S = 0.1
MAP_TIMEOUT_S = session_display.map_timeout()


class CompatSession:
    """One compat session: the StreamSession(s) of a /launch and its /resumes, on a
    SessionCore. The compat state record (`streaming.services`) is the core's registry
    record plus the compat fields (arm, app_id, encoder, negotiated stream parameters)."""

    def __init__(self, spec: dict):
        self.spec = spec
        self.id = spec["id"]
        c = spec["client"]
        self.client = {"name": c.get("name", ""), "fingerprint": c["fingerprint"],
                       "uuid": c.get("uuid", "")}  # fmt: skip
        self.width, self.height, self.fps = spec["width"], spec["height"], spec["fps"]
        self.slot = int(spec.get("port_slot") or 0)  # its stream ports: + 20 * slot
        # Compat's unpair reaches the session through its control list (`unpaired`).
        self.watcher = Watch(self.id, c["fingerprint"], ARM_TIMEOUT_S,
                             on_request=self._on_request, check_every_s=TICK_S)  # fmt: skip
        self.core = SessionCore("compat", self.id, self.client, self.width, self.height,
                                self.fps, str(spec.get("app_id", "")), spec.get("app_name", ""),
                                remote=spec.get("remote", ""))  # fmt: skip
        self.core.totals = self.totals
        public = {k: v for k, v in spec.items() if k not in ("rikey", "client", "id")}
        self.core.extra.update(public)
        self.capture: DisplayCapture | WaylandCapture | None = None
        self.wl_input = None  # WlrInput on wlroots backends, made at start
        self.stream: StreamSession | None = None
        self.app = None
        self.sound = None  # engine.audiofeed.SessionSound, None without sound
        self.limits: dict = {}
        self.reason = ""
        self.deliberate = False
        self.user_stop = False  # a graceful client stop that ends the title (on_quit/always)
        self.connected = False
        self.disconnect_sent = False
        self.stream_started = False
        self._cursor: dict = {}
        self.frames = 0
        self.bytes = 0
        # Finished streams' (count, sum) of RTT and encode samples, for the record's averages.
        self.rtt: tuple[int, float] = (0, 0.0)
        self.encode_ms: tuple[int, float] = (0, 0.0)
        self._lock = threading.Lock()

    @property
    def error(self) -> str:
        return self.core.error

    @error.setter
    def error(self, value: str) -> None:
        self.core.error = value

    def publish(self, state: str | None = None) -> bool:
        """The heartbeat: False when the /launch claim is no longer this session's."""
        if state is not None:
            self.core.state = state
        return services.publish(self.core)

    # -- StreamSession callbacks (its threads) -------------------------------------------------
    def on_event(self, kind: str, **data) -> None:
        with self._lock:
            if kind == "client.connected":
                self.connected, self.disconnect_sent = True, False
                self.core.emit(kind)
            elif kind == "client.disconnected":
                if self.connected and not self.disconnect_sent:
                    self.disconnect_sent = True
                    self.core.emit(kind, reason=disconnect_reason(data.get("reason", "")))
            elif kind == "stream.started" and not self.stream_started:
                self.stream_started = True
                self.core.state = "streaming"
                encoder = data.get("encoder") or ""
                where = encoding.where(encoder) if encoder else None
                self.core.stream_began(codec=data.get("codec"), encoder=encoder, where=where)
            elif kind == "stream.stopped" and self.stream_started:
                self.core.stream_ended()

    # -- lifecycle -------------------------------------------------------------------------------
    def start(self) -> None:
        """Display, prep, app, listeners; raises services-level errors as (status, message).
        The heartbeat runs meanwhile: on a loaded machine these steps can outlast the claim's
        TTL, and another launch must never be given this session's port slot."""
        stop = threading.Event()
        beat = threading.Thread(target=self._beat_until, args=(stop,), daemon=True)
        beat.start()
        try:
            self._start()
        finally:
            stop.set()
            beat.join(5)

    def _beat_until(self, stop: threading.Event) -> None:
        while not stop.wait(1.0):
            try:
                self.publish()
            except Exception:  # Redis hiccup: the next beat tries again
                log.warning("session %s: heartbeat failed during start", self.id, exc_info=True)

    def _start(self) -> None:
        from displays import machine

        self.app = apps.catalog_app(self.spec["app_id"])
        if self.app is None:
            raise LaunchFailed(404, "App not found")
        self.core.app_title = self.app.name
        self.publish()
        try:
            display = self.core.acquire_display(self.client["fingerprint"])
        except machine.DisplayError as exc:
            # Told to the client (the /launch answer) and to the operator (session.ended).
            raise LaunchFailed(503, f"No virtual display: {exc.message}") from None
        if session_display.input_at_start(display):
            # Keyboard and mouse exist before the app starts: apps (Xwayland among them) bind
            # the seat's devices when they appear, so devices made on the first event would
            # lose it.
            self.wl_input = session_display.session_input(display, self.id)
        # Limits and sound (the app's default sink is the session's own).
        self.limits = session_play.launch_limits(self.client["name"], self.app)
        self.core.extra.update(profile=self.limits["profile"],
                               encoder_preset=self.limits["encoder_preset"])  # fmt: skip
        self.sound = sound.open_sound(self.id)
        capture = self.sound.capture if self.sound is not None else None
        self.core.extra.update(sound.record_fields(capture))
        env = capture.app_env() if capture is not None else {}
        try:
            self.core.start_app(self.app, env, MAP_TIMEOUT_S)
        except session_display.DisplayLaunchError as exc:
            raise LaunchFailed(exc.status, exc.message) from None
        except OSError as exc:
            raise LaunchFailed(500, f"App failed to start: {exc}") from None
        self.capture = session_display.open_capture(display)
        self.arm(self.spec)
        self.core.began()

    def _input_sink(self):
        """Keyboard/mouse into the display (XTest); a session streams even when this fails."""
        display = self.core.display
        try:
            from media.input.session import SessionInput

            if session_display.input_at_start(display):
                if self.wl_input is None:
                    return None
                sink = SessionInput(None, device=self.wl_input)
            else:
                sink = SessionInput(display["x_display"], region=display.get("region"))
            self.core.extra["gamepads"] = "ok" if sink.gamepads_available else sink.gamepad_reason
            return sink
        except Exception as exc:
            log.warning("no input for session %s: %s", self.id, exc)
            return None

    def arm(self, arm: dict) -> None:
        """Bind the stream listeners for one /launch or /resume (keys from that request)."""
        try:
            launch = make_launch(arm, self.slot)
            launch.max_bitrate_kbps = self.limits.get("max_bitrate_kbps", 0)
            launch.encoder_tuning = self.limits.get("encoder_preset", -1)
            launch.offer = Offer(encoding.offered_or_h264(self.client["name"]))
            plan = encoding.plan(launch.offer.codecs)
            launch.encoders, launch.encoder_config = plan.encoders, plan.config
            first = plan.first("h264")
            # GET /gpus `active` until the stream reports the encoder that really opened.
            self.core.use_encoder(encoder=first, where=encoding.where(first))
            sound = self.sound.stream if self.sound else None
            self.stream = StreamSession(
                launch, self.capture, on_event=self.on_event,
                input_sink=self._input_sink(), audio_source=sound,
            )  # fmt: skip
        except OSError as exc:
            raise LaunchFailed(503, f"Stream ports busy: {exc}") from None
        self.stream.start()
        self.watcher.arm()
        cap = self.capture.capture_ms
        self._cursor = {"cap_base": cap.count, "enc": 0, "bytes": 0, "frames": 0}
        self.publish("armed" if not self.stream_started else "streaming")

    def replace_stream(self, arm: dict) -> None:
        """/resume: end the current stream (the old client is told) and arm a new one."""
        self.stop_stream("host")
        self.connected = False
        self.stream_started = False
        self.arm(arm)

    def stop_stream(self, reason: str) -> None:
        stream = self.stream
        if stream is None:
            return
        # Its video thread's last act may be `stream.stopped`, which writes this stream's
        # record: until it has stopped, `totals` must still read its live counters.
        stream.stop(reason)
        self.stream = None
        self._fold(stream)
        if self.connected and not self.disconnect_sent:  # the host ended it, or an error did
            why = stream.stop_reason if stream.stop_reason not in (None, "host") else ""
            self.on_event("client.disconnected", reason=why or self.reason or reason)
        if self.stream_started:
            self.on_event("stream.stopped")

    def _fold(self, stream: StreamSession) -> None:
        """Keep a finished stream's counters for the record (a resume starts new ones)."""
        s = stream.stats
        self.frames += s.frames_sent
        self.bytes += s.bytes_sent
        self.rtt = _plus(self.rtt, s.rtt_ms.tally())
        self.encode_ms = _plus(self.encode_ms, s.encode_ms.tally())

    def totals(self) -> tuple[int, int, tuple, tuple]:
        """The session's counters for the record (a live stream's are not folded in yet):
        frames, bytes, and the (count, sum) of encode and RTT samples."""
        frames, nbytes, enc, rtt = self.frames, self.bytes, self.encode_ms, self.rtt
        stream = self.stream
        if stream is not None:
            s = stream.stats
            frames, nbytes = frames + s.frames_sent, nbytes + s.bytes_sent
            enc, rtt = _plus(enc, s.encode_ms.tally()), _plus(rtt, s.rtt_ms.tally())
        return frames, nbytes, enc, rtt

    def watch(self) -> None:
        """The process's main thread until the session must end; sets `reason`. The checks
        are the shared watch's (`streaming.sessions.watch`); the stream's own end is here."""
        last_sample = time.monotonic()
        while True:
            now = time.monotonic()
            stream = self.stream
            capture = self.capture
            end = self.watcher.tick(
                connected=self.connected or stream is None, display=self.core.display,
                app=self.core.app, capture_lost=capture.what if capture and capture.lost() else "",
                publish=self.publish,
            )  # fmt: skip
            if end is not None:
                self.reason, self.deliberate = end.reason, end.deliberate
                self.error = end.error or self.error
                return
            stream = self.stream  # a /resume replaced it
            if stream is not None and not stream.running:
                if stream.stop_reason != "client":
                    self.reason = stream.stop_reason or "client"
                    if stream.rtsp.refused:  # encryption required: session.ended says why
                        self.error = stream.rtsp.refused
                    return
                self.stop_stream("client")
                if self.user_stop_ends():
                    self.reason, self.user_stop = "client", True
                    return
                # `keep`: the app stays for a /resume or /cancel (no deadline: the game is
                # never ended by the host; the title exiting still ends the session).
                stream = None
                self.publish("idle")
            if stream is not None:
                self._feed_latency(stream)
            if stream is not None and now - last_sample >= 1.0:
                self._sample(stream, now - last_sample)
                last_sample = now
            time.sleep(TICK_S)

    def _on_request(self, req: dict) -> End | None:
        """A /resume (through the control list): a new stream, answered as /launch is."""
        if req.get("op") != "resume":
            return None
        try:
            self.replace_stream(req)
            services.report(req["arm"], 200)
        except LaunchFailed as exc:
            services.report(req["arm"], exc.status, exc.message)
            return End("error", False, exc.message)
        return None

    def user_stop_ends(self) -> bool:
        """The client ended its stream gracefully (`client.disconnected` `quit`, a user stop):
        the session settings, read now, decide. `keep` never ends the game, so the session
        waits for a /resume or /cancel; `on_quit` and `always` end the game on a user stop at
        once, so the session ends now. (`disconnect_grace_seconds` is for a vanished client
        under `always` only: `timeout`/`error` ends, handled by the lifecycle layer.)"""
        from games import settings as game_settings

        try:
            policy = game_settings.load().game_on_session_end
        except Exception:  # a broken settings file must not end a stream
            log.exception("session settings unreadable; keeping the app for a /resume")
            return False
        return policy in (game_settings.ON_QUIT, game_settings.ALWAYS)

    def _feed_latency(self, stream: StreamSession) -> None:
        """Frame i of this stream: capture i (since arming) and encode i, for /stream/latency."""
        cur, cap, enc = self._cursor, self.capture.capture_ms, stream.stats.encode_ms
        for i in range(max(cur["enc"], enc.first), enc.count):
            j = cur["cap_base"] + i
            if j < cap.count:
                capture_ms, encode_ms = cap.at(j), enc.at(i)
                if capture_ms is not None and encode_ms is not None:
                    self.core.latency(capture_ms, encode_ms)
        cur["enc"] = enc.count

    def _sample(self, stream: StreamSession, dt: float) -> None:
        s, sent = stream.stats, self._cursor
        kbps = (s.bytes_sent - sent["bytes"]) * 8 / 1000 / dt
        new_enc = s.encode_ms.since(sent["frames"])
        sent["bytes"], sent["frames"] = s.bytes_sent, s.encode_ms.count
        rtt = s.rtt_ms.last
        params = stream.rtsp.params
        if params is not None:
            self.core.extra.update(
                bitrate_kbps=stream.launch.video_kbps(params.bitrate_kbps),
                packet_size=params.packet_size,
                min_fec=params.min_fec_packets,
            )
            if s.encoder and s.encoder != self.core.encoder:  # an encoder handed over
                self.core.use_encoder(s.codec, s.encoder, encoding.where(s.encoder))
        if not self.stream_started:
            return
        encode = sum(new_enc) / len(new_enc) if new_enc else None
        sent_n, lost_n, _ = stream.loss.snapshot()  # 0x5502 reports against datagrams sent
        loss = adaptive.loss_pct(sent_n - sent.get("sent", 0), lost_n - sent.get("lost", 0))
        sent["sent"], sent["lost"] = sent_n, lost_n
        target = s.target_kbps or (params.bitrate_kbps if params else None)
        self.core.sample(kbps, rtt, encode, target_kbps=target, loss_pct=loss)

    def finish(self) -> None:
        """Undo everything in reverse; safe after a partial start."""
        with contextlib.suppress(Exception):
            self.publish("ending")
        self.stop_stream("host")  # "host" sends the client the termination message
        if self.capture is not None:
            self.capture.close()
        if self.wl_input is not None:
            with contextlib.suppress(Exception):
                self.wl_input.close()
        if self.sound is not None:
            self.sound.close()
        deliberate = self.deliberate or self.reason not in CLIENT_REASONS
        # A user stop is deliberate for the title; the display still lingers (the client
        # left, the operator did not end anything).
        self.core.finish(self.reason, deliberate, title_deliberate=deliberate or self.user_stop)


class LaunchFailed(Exception):
    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status, self.message = status, message


def run(spec: dict) -> str:
    """A compat session from its /launch claim to its end; returns the end reason."""
    if not services.owns(spec["id"], int(spec.get("port_slot") or 0)):
        services.report(spec["arm"], 503, "Launch expired before the engine picked it up")
        return "expired"
    session = CompatSession(spec)
    try:
        session.start()
    except LaunchFailed as exc:
        session.reason, session.error = "launch_failed", exc.message
        services.report(spec["arm"], exc.status, exc.message)
    except Exception as exc:
        log.exception("session %s failed to start", session.id)
        session.reason, session.error = "error", str(exc)
        services.report(spec["arm"], 500, "Streaming engine error")
    else:
        services.report(spec["arm"], 200)
        try:
            session.watch()
        except Exception as exc:
            log.exception("session %s failed", session.id)
            session.reason, session.error = "error", str(exc)
    try:
        session.finish()
    finally:
        services.release(session.id, session.slot)
    return session.reason


def main(spec: dict) -> int:
    """The session process's body (`streaming.sessions.process.run`): SIGTERM (host stop, or
    the session manager dying) ends the session through its normal cleanup."""
    import json
    import os
    import sys

    signal.signal(signal.SIGTERM, lambda signum, frame: SHUTDOWN.set())
    sys.stdout.write(json.dumps({"pid": os.getpid()}) + "\n")
    sys.stdout.flush()
    sys.stdout.close()
    run(spec)
    return 0


def _plus(a: tuple[int, float], b: tuple[int, float]) -> tuple[int, float]:
    return a[0] + b[0], a[1] + b[1]
