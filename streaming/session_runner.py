"""One compat session, from an accepted /launch to nothing left running (runs in a Celery task).

Order, and why: the display first (the app and the capture need it), then prep `do` steps and
the app (the client should see the app when the picture starts), then the StreamSession binds
the fixed stream ports; only then is /launch answered (through `services.report`), so the
client's RTSP connection never races the listener. The task's own thread then watches: requests
from other processes (stop, resume), the app exiting, the client never connecting, the stream
ending; and publishes the heartbeat, live statistics and per-second history samples.

Sound, launch limits and the game's lifecycle are `streaming.session_play`'s: the sink exists
before the app starts (its default sink), and the title is handed to the lifecycle layer.

The end runs in reverse whatever happened: stream stopped, the title closed or left to the
session settings (else the app group terminated), `undo` steps in reverse, the display
handed back to its policy (`disconnect`, deliberate for operator and client stops), the
history record and the end events.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
import time
from datetime import UTC, datetime

from hooks import prep, stream_webhooks
from hooks.events import emit
from streaming import services, session_display, session_play, stats
from streaming.apprun import AppProcess, app_vars, session_env
from streaming.engine.session import StreamSession
from streaming.framesource import DisplayCapture, WaylandCapture
from streaming.launchconfig import make_launch

log = logging.getLogger("streaming.sessions")

ARM_TIMEOUT_S = 20.0  # /launch answered, but no client connected the control stream
TICK_S = 0.1


MAP_TIMEOUT_S = session_display.map_timeout()
# Stop reasons that leave the display to its linger countdown (the client may come back);
# the others are deliberate (operator, /cancel, unpair) and skip the linger.
CLIENT_REASONS = {
    "client",
    "timeout",
    "protocol_error",
    "no_video_ping",
    "arm_timeout",
    "host_shutdown",
}
# StreamSession's stop reasons -> client.disconnected `reason` (quit | timeout | error).
DISCONNECT_REASON = {"disconnected": "quit", "client": "quit", "timeout": "timeout",
                     "protocol_error": "error", "no_video_ping": "error"}  # fmt: skip


SHUTDOWN = threading.Event()  # set by the task's SIGTERM handler (host shutdown)
_stats_failed = [False]


def _stats(fn, *args, **kwargs) -> None:
    """Live statistics are a view: a failure is logged once and never ends the stream."""
    try:
        fn(*args, **kwargs)
    except Exception:
        if not _stats_failed[0]:
            _stats_failed[0] = True
            log.exception("live stream statistics failed")


def _encoder_of(codec: str) -> dict:
    """What this stream encodes on (`streaming.gpus.encoder_for`); software if unknown."""
    from streaming import gpus

    try:
        return gpus.encoder_for(codec)
    except Exception:  # noqa: BLE001 - a GPU probe failure must not stop a stream
        log.warning("encoder GPU unknown for %s", codec, exc_info=True)
        return dict(gpus.SOFTWARE)


class Session:
    def __init__(self, spec: dict):
        self.spec = spec
        self.id = spec["id"]
        self.client = spec["client"]
        self.width, self.height, self.fps = spec["width"], spec["height"], spec["fps"]
        self.mode = f"{self.width}x{self.height}@{self.fps}"
        self.state = {**spec, "state": "starting", "t_start": time.time()}
        self.state.pop("rikey", None)
        self.t_start = datetime.now(UTC)
        self.display: dict | None = None
        self.display_failed = False  # the capture backend refused: session.ended says why
        self.app_proc: AppProcess | None = None
        self.capture: DisplayCapture | WaylandCapture | None = None
        self.wl_input = None  # WlrInput on wlroots backends, made at start
        self.stream: StreamSession | None = None
        self.app = None
        self.sound = None  # engine.audiofeed.SessionSound, None without sound
        self.game: session_play.GameLink | None = None
        self.limits: dict = {}
        self.reason = ""
        self.deliberate = False
        self.user_stop = False  # a graceful client stop that ends the title (on_quit/always)
        self.error = ""
        self.connected = False
        self.disconnect_sent = False
        self.stream_started = False
        self.stream_t0: float | None = None
        self.stream_t1: float | None = None
        self.armed_at = self.idle_since = 0.0
        self.started = False
        self._cursor: dict = {}
        self.samples: list[dict] = []
        self.frames = 0
        self.bytes = 0
        self.rtt: list[int] = []
        self.encode_ms: list[float] = []
        self._lock = threading.Lock()

    # -- refs for events -----------------------------------------------------------------------
    def client_ref(self) -> dict:
        return {"name": self.client.get("name", ""), "fingerprint": self.client["fingerprint"],
                "plane": "compat"}  # fmt: skip

    def session_ref(self) -> dict:
        return {"id": self.id, "client": self.client["fingerprint"][:12], "mode": self.mode,
                "hdr": False}  # fmt: skip

    def stream_ref(self) -> dict:
        return {"mode": self.mode, "hdr": False, "client": self.client.get("name", ""),
                "app": self.state.get("app_name", ""), "plane": "compat"}  # fmt: skip

    # -- StreamSession callbacks (its threads) -------------------------------------------------
    def on_event(self, kind: str, **data) -> None:
        with self._lock:
            if kind == "client.connected":
                self.connected, self.disconnect_sent = True, False
                emit(kind, {"client": self.client_ref()})
            elif kind == "client.disconnected":
                if self.connected and not self.disconnect_sent:
                    self.disconnect_sent = True
                    reason = DISCONNECT_REASON.get(data.get("reason", ""), "quit")
                    emit(kind, {"client": self.client_ref(), "reason": reason})
            elif kind == "stream.started" and not self.stream_started:
                self.stream_started, self.stream_t0 = True, time.monotonic()
                self.state["state"] = "streaming"
                emit(kind, {"stream": self.stream_ref()})
                stream_webhooks.notify(stream_webhooks.START, self.record_fields())
            elif kind == "stream.stopped" and self.stream_started and self.stream_t1 is None:
                self.stream_t1 = time.monotonic()
                emit(kind, {"stream": self.stream_ref()})

    # -- lifecycle -------------------------------------------------------------------------------
    def start(self) -> None:
        """Display, prep, app, listeners; raises services-level errors as (status, message)."""
        from library import catalog
        from streaming.displays import machine

        self.app = catalog.find_app(str(self.spec["app_id"]))
        if self.app is None:
            raise LaunchFailed(404, "App not found")
        self.state["app_name"] = self.app.name
        try:
            self.display = machine.acquire(self.client["fingerprint"], self.mode)
        except machine.DisplayError as exc:
            # Told to the client (the /launch answer) and to the operator (session.ended).
            self.display_failed = True
            raise LaunchFailed(503, f"No virtual display: {exc.message}") from None
        backend = self.display["backend"]
        wayland = self.display.get("wayland_display") or ""
        x_display = session_display.app_x_display(self.display)
        mode = (self.width, self.height, self.fps)
        env = session_env(os.environ, x_display=x_display, app=self.app, client=self.client,
                          mode=mode, wayland=wayland)  # fmt: skip
        if wayland:
            # Keyboard and mouse exist before the app starts: apps (Xwayland among them) bind
            # the seat's devices when they appear, so devices made on the first event would
            # lose it.
            self.wl_input = self._wlr_input()
        # Limits, sound (the app's default sink is the session's own) and the game's link.
        play = session_play.prepare(self.id, self.client, self.app, env, self.state)
        self.limits, self.sound, self.game = play
        resumed = bool(self.app.cmd.strip()) and self.game.resume(self.app)
        if self.app.prep and not resumed:
            prep.run_do(self.prep_key, self.app.prep, env)
        if self.app.cmd.strip() and not resumed:
            if backend == "sway":
                self._launch_in_compositor(mode)
            else:
                try:
                    self.app_proc = AppProcess(self.app.cmd, env, self.app.working_dir,
                                               self.app.exit_timeout)  # fmt: skip
                except OSError as exc:
                    raise LaunchFailed(500, f"App failed to start: {exc}") from None
            self.game.launched(self.app, self.app_proc.pgid,
                               self.prep_key if self.app.prep else None)  # fmt: skip
        self.capture = session_display.open_capture(self.display)
        self.arm(self.spec)
        self.started = True
        emit("session.started", {"session": self.session_ref()})

    def _wlr_input(self):
        return session_display.wlr_input(self.display, self.id)

    def _launch_in_compositor(self, mode: tuple) -> None:
        """The app onto the session's output of the headless compositor (it must map a
        window within MAP_TIMEOUT_S, else the launch fails and nothing of it stays)."""
        try:
            self.app_proc = session_display.launch_in_compositor(
                self.display, self.app.cmd, app_vars(self.app, self.client, mode),
                self.app.working_dir, self.app.exit_timeout, MAP_TIMEOUT_S,
            )  # fmt: skip
        except session_display.DisplayLaunchError as exc:
            raise LaunchFailed(exc.status, exc.message) from None

    @property
    def prep_key(self) -> str:
        return f"compat-session-{self.id}"

    def _input_sink(self):
        """Keyboard/mouse into the display (XTest); a session streams even when this fails."""
        try:
            from streaming.input.session import SessionInput

            if self.display.get("wayland_display"):
                if self.wl_input is None:
                    return None
                sink = SessionInput(None, device=self.wl_input)
            else:
                sink = SessionInput(self.display["x_display"], region=self.display.get("region"))
            self.state["gamepads"] = "ok" if sink.gamepads_available else sink.gamepad_reason
            return sink
        except Exception as exc:  # noqa: BLE001
            log.warning("no input for session %s: %s", self.id, exc)
            return None

    def arm(self, arm: dict) -> None:
        """Bind the stream listeners for one /launch or /resume (keys from that request)."""
        try:
            launch = make_launch(arm)
            launch.max_bitrate_kbps = self.limits.get("max_bitrate_kbps", 0)
            launch.encoder_tuning = self.limits.get("encoder_preset", -1)
            self.state["encoder"] = _encoder_of(launch.codec)  # for GET /gpus `active`
            sound = self.sound.stream if self.sound else None
            self.stream = StreamSession(
                launch, self.capture, on_event=self.on_event,
                input_sink=self._input_sink(), audio_source=sound,
            )  # fmt: skip
        except OSError as exc:
            raise LaunchFailed(503, f"Stream ports busy: {exc}") from None
        self.stream.start()
        self.armed_at = time.monotonic()
        cap = self.capture.capture_ms
        self._cursor = {"cap_base": len(cap), "enc": 0, "bytes": 0, "frames": 0}
        self.state["state"] = "armed" if not self.stream_started else "streaming"
        services.publish(self.state)

    def replace_stream(self, arm: dict) -> None:
        """/resume: end the current stream (the old client is told) and arm a new one."""
        self.stop_stream("host")
        self.connected = False
        self.stream_started = False
        self.stream_t0 = self.stream_t1 = None
        self.arm(arm)

    def stop_stream(self, reason: str) -> None:
        stream, self.stream = self.stream, None
        if stream is None:
            return
        stream.stop(reason)
        self._fold(stream)
        if self.connected and not self.disconnect_sent:  # the host ended it, or an error did
            self.on_event("client.disconnected", reason=stream.stop_reason or reason)
        if self.stream_started and self.stream_t1 is None:
            self.on_event("stream.stopped")

    def _fold(self, stream: StreamSession) -> None:
        """Keep a finished stream's counters for the record (a resume starts new ones)."""
        s = stream.stats
        self.frames += s.frames_sent
        self.bytes += s.bytes_sent
        self.rtt += s.rtt_ms
        self.encode_ms += s.encode_ms

    def watch(self) -> None:
        """The task's thread until the session must end; sets `reason`."""
        last_beat = last_sample = time.monotonic()
        while True:
            now = time.monotonic()
            if SHUTDOWN.is_set():
                self.reason = "host_shutdown"
                return
            for req in services.pop_requests():
                if req.get("id") != self.id:
                    continue
                if req.get("op") == "stop":
                    self.reason = req.get("reason") or "stopped"
                    self.deliberate = bool(req.get("deliberate", True))
                    return
                if req.get("op") == "resume":
                    try:
                        self.replace_stream(req)
                        services.report(req["arm"], 200)
                    except LaunchFailed as exc:
                        services.report(req["arm"], exc.status, exc.message)
                        self.reason, self.error = "error", exc.message
                        return
            stream = self.stream
            if stream is not None and not stream.running:
                if stream.stop_reason != "client":
                    self.reason = stream.stop_reason or "client"
                    return
                self.stop_stream("client")
                if self.user_stop_ends():
                    self.reason, self.user_stop = "client", True
                    return
                # `keep`: the app stays for a /resume or /cancel (no deadline: the game is
                # never ended by the host; the title exiting still ends the session).
                self.state["state"], self.idle_since, stream = "idle", now, None
                services.publish(self.state)
            gone = self._compositor_gone()
            if gone:
                # The headless compositor died: its apps die with it, but the cause is the
                # display, and that is what the session ends with.
                self.reason, self.deliberate, self.error = "display_lost", True, gone
                return
            if self.game is not None and self.game.game_exit is not None:
                self.reason, self.deliberate = "app_exited", True  # session_on_game_exit
                return
            # Titles the lifecycle layer does not track end the session when the launched
            # command has exited (one its hints never found is followed through its group).
            if (self.app_proc is not None and self.app_proc.exited()
                    and not (self.game is not None and self.game.watching())):  # fmt: skip
                self.reason = "app_exited"
                return
            if self.capture is not None and self.capture.lost():
                # The X server went away (an attached desktop logged out): end, and say why.
                self.reason, self.deliberate = "display_lost", True
                self.error = f"{self.capture.what} stopped answering"
                return
            if stream is not None and not self.connected and now - self.armed_at > ARM_TIMEOUT_S:
                self.reason = "arm_timeout"
                return
            if stream is not None:
                self._feed_latency(stream)
            if now - last_beat >= 1.0:
                last_beat = now
                if not services.publish(self.state):
                    self.reason, self.deliberate = "released", True
                    return
            if stream is not None and now - last_sample >= 1.0:
                self._sample(stream, now - last_sample)
                last_sample = now
            time.sleep(TICK_S)

    def _compositor_gone(self) -> str:
        return session_display.compositor_gone(self.display)

    def user_stop_ends(self) -> bool:
        """The client ended its stream gracefully (`client.disconnected` `quit`, a user stop):
        the session settings, read now, decide. `keep` never ends the game, so the session
        waits for a /resume or /cancel; `on_quit` and `always` end the game on a user stop at
        once, so the session ends now. (`disconnect_grace_seconds` is for a vanished client
        under `always` only: `timeout`/`error` ends, handled by the lifecycle layer.)"""
        from streaming.game import settings as game_settings

        try:
            policy = game_settings.load().game_on_session_end
        except Exception:  # noqa: BLE001 - a broken settings file must not end a stream
            log.exception("session settings unreadable; keeping the app for a /resume")
            return False
        return policy in (game_settings.ON_QUIT, game_settings.ALWAYS)

    def _feed_latency(self, stream: StreamSession) -> None:
        """Frame i of this stream: capture i (since arming) and encode i, for /stream/latency."""
        cur, cap, enc = self._cursor, self.capture.capture_ms, stream.stats.encode_ms
        for i in range(cur["enc"], len(enc)):
            j = cur["cap_base"] + i
            if j < len(cap):
                _stats(stats.record_latency, cap[j], enc[i])
        cur["enc"] = len(enc)

    def _sample(self, stream: StreamSession, dt: float) -> None:
        s, sent = stream.stats, self._cursor
        kbps = (s.bytes_sent - sent["bytes"]) * 8 / 1000 / dt
        new_enc = s.encode_ms[sent["frames"] :]
        sent["bytes"], sent["frames"] = s.bytes_sent, len(s.encode_ms)
        rtt = s.rtt_ms[-1] if s.rtt_ms else None
        params = stream.rtsp.params
        if params is not None:
            self.state.update(
                bitrate_kbps=stream.launch.video_kbps(params.bitrate_kbps),
                packet_size=params.packet_size,
                min_fec=params.min_fec_packets,
                codec="h264",
            )
        if not self.stream_started:
            return
        _stats(stats.record_network, rtt_ms=rtt, loss_pct=0.0, bitrate_kbps=kbps,
                             target_kbps=params.bitrate_kbps if params else None)  # fmt: skip
        self.samples.append({
            "t": round(time.time() - self.state["t_start"], 1),
            "bitrate_kbps": round(kbps, 1),
            "rtt_ms": rtt,
            "encode_ms": round(sum(new_enc) / len(new_enc), 2) if new_enc else None,
        })  # fmt: skip

    def finish(self) -> None:
        """Undo everything in reverse; safe after a partial start."""
        from streaming import history
        from streaming.displays import machine

        self.state["state"] = "ending"
        with contextlib.suppress(Exception):
            services.publish(self.state)
        self.stop_stream("host")  # "host" sends the client the termination message
        if self.capture is not None:
            self.capture.close()
        if self.wl_input is not None:
            with contextlib.suppress(Exception):
                self.wl_input.close()
        if self.sound is not None:
            self.sound.close()
        _stats(stats.reset)
        deliberate = self.deliberate or self.reason not in CLIENT_REASONS
        # The title: closed (game.exited terminated), kept, or waiting out its grace window.
        # A user stop is deliberate for the title; the display still lingers (the client
        # left, the operator did not end anything).
        title_deliberate = deliberate or self.user_stop
        lives_on = (
            self.game.finish(self.reason, title_deliberate) if self.game is not None else False
        )
        if self.app_proc is not None:
            if lives_on:
                self.app_proc.proc.poll()  # the game lives on in its own group; reap only
            else:
                self.app_proc.terminate()
        if self.app is not None and self.app.prep and not lives_on:
            prep.run_undo(self.prep_key)  # a no-op when the lifecycle layer already ran them
        if self.display is not None:
            try:
                machine.disconnect(self.display["slot"], deliberate=deliberate)
            except machine.DisplayError as exc:
                log.warning("display slot %s: %s", self.display["slot"], exc.message)
        if self.started:
            record = self.record_fields()
            fields = {k: v for k, v in record.items() if k not in ("t_start", "t_end")}
            try:
                history.record_session(t_start=self.t_start, t_end=datetime.now(UTC),
                                       samples=self.samples, plane="compat",
                                       client_fingerprint=self.client["fingerprint"],
                                       **fields)  # fmt: skip
            except Exception:
                log.exception("session %s: history record not written", self.id)
            if self.stream_t0 is not None:
                stream_webhooks.notify(stream_webhooks.END, record)
            ended = {"session": self.session_ref(), "reason": self.reason}
            if self.error:
                ended["error"] = self.error  # e.g. display_lost: which display, what happened
            emit("session.ended", ended)
        elif self.display_failed:
            # No session.started came before it: the operator still learns why none did.
            emit("session.ended", {"session": self.session_ref(), "reason": self.reason,
                                   "error": self.error})  # fmt: skip
        log.info("session %s ended (%s)", self.id, self.reason)

    def record_fields(self) -> dict:
        frames, enc, rtt = self.frames, self.encode_ms, self.rtt
        stream = self.stream
        if stream is not None:  # a live stream's counters are not folded in yet
            frames += stream.stats.frames_sent
            enc, rtt = enc + stream.stats.encode_ms, rtt + stream.stats.rtt_ms
        nbytes = self.bytes + (stream.stats.bytes_sent if stream is not None else 0)
        span = 0.0
        if self.stream_t0 is not None:
            span = (self.stream_t1 or time.monotonic()) - self.stream_t0
        return {
            "t_start": self.t_start.isoformat(),
            "t_end": datetime.now(UTC).isoformat(),
            "app_name": self.state.get("app_name", ""),
            "client_name": self.client.get("name", ""),
            "client_address": self.spec.get("remote", ""),
            "codec": "h264",
            "width": self.width,
            "height": self.height,
            "fps": self.fps,
            "avg_bitrate_kbps": round(nbytes * 8 / 1000 / span, 1) if span > 0 else 0.0,
            "avg_rtt_ms": round(sum(rtt) / len(rtt), 2) if rtt else 0.0,
            "avg_encode_ms": round(sum(enc) / len(enc), 2) if enc else 0.0,
            # Frames the target rate owed but the sender did not deliver (behind or capture late).
            "dropped_frames": max(0, int(span * self.fps) - frames) if span > 0 else 0,
            "error": self.error,
        }


class LaunchFailed(Exception):
    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status, self.message = status, message


def run(spec: dict) -> str:
    """The Celery task's body; returns the end reason."""
    state = services.current()
    if state is None or state.get("id") != spec["id"]:
        services.report(spec["arm"], 503, "Launch expired before the engine picked it up")
        return "expired"
    session = Session(spec)
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
        services.release(session.id)
    return session.reason
