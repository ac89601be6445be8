"""The compat plane's session: its transport (RTSP, ENet control, RTP video and audio through
`compat.engine.stream.StreamSession`) and its admission (the /launch claim) around the one
session lifecycle (`streaming.sessions.lifecycle.SessionCore`). Runs in its own session process
(forked by the session manager, `streaming.sessions.process.run`).

Order, and why: the display first (the app and the capture need it), then prep `do` steps and
the app (the client should see the app when the picture starts), then the StreamSession binds
the fixed stream ports; only then is /launch answered (the spawn socket's first line), so the
client's RTSP connection never races the listener; a /resume through Redis. The main thread
then runs the shared watch (`streaming.sessions.watch`) and the stream's end, and the figures.

The end runs in reverse whatever happened (`SessionCore.finish`): stream stopped, the title
closed or left to the session settings (else the app group terminated), `undo` steps in
reverse, the display handed back to its policy (`disconnect`, deliberate for operator and
client stops), the history record and the end events.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import threading
import time

from compat.codecs import Offer
from compat.engine.stream import StreamSession
from compat.launchconfig import make_launch
from compat.session_figures import Figures
from displays import machine
from media.framesource import DisplayCapture, WaylandCapture
from media.input.session import SessionInput
from streaming import services, session_display, session_play
from streaming.sessions import admission, apps, encoding, sound, watch
from streaming.sessions.lifecycle import SessionCore
from streaming.sessions.process import held_answer, reply
from streaming.sessions.watch import SHUTDOWN, End, Watch, disconnect_reason

log = logging.getLogger("streaming.sessions")

ARM_TIMEOUT_S = 20.0  # /launch answered, but no client connected the control stream
TICK_S = 0.1
MAP_TIMEOUT_S = session_display.map_timeout()


def launch_channels(spec: dict) -> int:
    """The channel count /launch asked for (checked there): 2, 6 or 8; stereo when absent."""
    info = int((spec.get("options") or {}).get("surroundAudioInfo") or 2)
    return info & 0xFFFF


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
        self.figures = Figures(self.core)
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
        self._lock = threading.Lock()

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
        with watch.beating(self.publish, self.id):
            self._start()

    def _start(self) -> None:
        self.app = apps.catalog_app(self.spec["app_id"])
        if self.app is None:
            raise LaunchFailed(404, "App not found")
        try:  # before anything starts: an encoder setting that cannot work refuses the launch
            encoding.check_pin()
        except encoding.Refused as exc:
            raise LaunchFailed(exc.status, str(exc)) from None
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
        try:  # the sink in the launch's layout (surroundAudioInfo's channel count)
            self.sound = sound.open_sound(self.id, launch_channels(self.spec))
        except sound.SoundRefused as exc:
            raise LaunchFailed(503, f"No surround sound: {exc}") from None
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
            launch.encoder_threads = plan.threads
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
        except encoding.Refused as exc:  # the encoder setting changed since the launch
            raise LaunchFailed(exc.status, str(exc)) from None
        self.stream.start()
        self.watcher.arm()
        self.figures.armed(self.capture)
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
        self.figures.fold(stream)
        if self.connected and not self.disconnect_sent:  # the host ended it, or an error did
            why = stream.stop_reason if stream.stop_reason not in (None, "host") else ""
            self.on_event("client.disconnected", reason=why or self.reason or reason)
        if self.stream_started:
            self.on_event("stream.stopped")

    def totals(self) -> tuple[int, int, tuple, tuple]:
        return self.figures.totals(self.stream)

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
                self.core.error = end.error or self.core.error
                return
            stream = self.stream  # a /resume replaced it
            if stream is not None and not stream.running:
                if stream.stop_reason != "client":
                    self.reason = stream.stop_reason or "client"
                    if stream.rtsp.refused:  # the ANNOUNCE was refused: session.ended says why
                        self.core.error = stream.rtsp.refused
                    return
                self.stop_stream("client")
                if session_play.user_stop_ends():
                    self.reason, self.user_stop = "client", True
                    return
                # `keep`: the app stays for a /resume or /cancel (no deadline: the game is
                # never ended by the host; the title exiting still ends the session).
                stream = None
                self.publish("idle")
            if stream is not None:
                self.figures.feed_latency(stream, self.capture)
            if stream is not None and now - last_sample >= 1.0:
                self.figures.sample(stream, now - last_sample, self.stream_started)
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
        self.core.finish(self.reason, self.deliberate, user_stop=self.user_stop)


class LaunchFailed(Exception):
    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status, self.message = status, message


def run(spec: dict, answer) -> str:
    """A compat session from its /launch claim to its end; returns the end reason. `answer`
    gets the /launch answer, `{"status", "message"}`, once the session is armed or failed."""
    if not admission.take("compat", spec, os.getpid()):
        reply({"status": 503, "message": "Launch expired before the engine picked it up"}, answer)
        return "expired"
    session = CompatSession(spec)
    try:
        session.start()
    except LaunchFailed as exc:
        session.reason, session.core.error = "launch_failed", exc.message
        reply({"status": exc.status, "message": exc.message}, answer)
    except Exception as exc:
        log.exception("session %s failed to start", session.id)
        session.reason, session.core.error = "error", str(exc)
        reply({"status": 500, "message": "Streaming engine error"}, answer)
    else:
        reply({"status": 200}, answer)
        try:
            session.watch()
        except Exception as exc:
            log.exception("session %s failed", session.id)
            session.reason, session.core.error = "error", str(exc)
    try:
        session.finish()
    finally:
        admission.leave("compat", session.id, os.getpid(), session.slot)
    return session.reason


def main(spec: dict) -> int:
    """The session process's body (`streaming.sessions.process.run`): SIGTERM (host stop, or
    the session manager dying) ends the session through its normal cleanup."""
    signal.signal(signal.SIGTERM, lambda signum, frame: SHUTDOWN.set())
    with held_answer({"status": 500, "message": "Streaming engine error"}) as answer:
        run(spec, answer)
    return 0
