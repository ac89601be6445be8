"""The one lifecycle of a session, whichever plane carries it (docs/architecture.md, "Path of
a session").

    plan -> display -> prep `do` -> app and game link -> [the plane's transport]
         -> stats, history, stream webhooks, events -> game end, prep `undo` -> display back

A plane (compat: `compat.session`, native: `native.peer`) admits the
client, builds a `SessionCore` and drives its transport; the core does everything else, once,
so both planes produce the same registry record, event payloads, history record fields,
`stream.start`/`stream.end` webhooks and `/api/stream/latency` figures.

Identity in every payload: `client` is the client's name (its label), `client_id` the first 12
hex digits of its certificate fingerprint; the session `id` is `registry.new_id()`.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shlex
import signal
import time
from collections import deque
from datetime import UTC, datetime

from displays import machine
from games import appfields, apprun
from games import lifecycle as game_lifecycle
from games import registry as game_registry
from games import session_settings as game_settings
from hooks import events, prep, stream_webhooks
from streaming import history, session_display, session_play, stats
from streaming.sessions import admission, encoding, registry, sound
from streaming.sessions.watch import CLIENT_REASONS, CLOSE_REASONS

log = logging.getLogger("streaming.sessions")

SETTLE_S = 2.0  # how long an ended command waits for its found game's exit to be reported
LIVE_POINTS = 60  # per-second points in the registry record (the console's live charts)


class AppRun:
    """The session's app in its display (nothing for Desktop) and its game in the lifecycle
    layer (`session_play.GameLink`). `app` has id, name, cmd, env, working_dir, prep,
    exit_timeout and raw (a catalog `App`, or the native plane's picker choice)."""

    def __init__(self, app, session_id, client_name: str, plane: str):
        self.app = app
        self.cmd = (app.cmd or "").strip()
        self.prep = list(app.prep or [])
        self.prep_key = f"{plane}-session-{session_id}"
        self.proc = None  # apprun.AppProcess or the compositor's app
        # The apps.json run fields (games.appfields); a library title has none: the defaults.
        self.output = (getattr(app, "output", "") or "").strip()
        self.detached = [d for d in getattr(app, "detached", None) or [] if str(d).strip()]
        self.auto_detach = bool(getattr(app, "auto_detach", True))
        self.wait_all = bool(getattr(app, "wait_all", True))
        self.detached_pids: list[int] = []
        self.launcher_detached = False  # auto-detach: the launched command was a launcher
        self._settle_t0 = 0.0
        self.prepped = False
        self.resumed = False
        self.game = session_play.GameLink(session_id, client_name, plane=plane)

    def start(self, display: dict, extra_env: dict, client: dict, mode: tuple,
              map_timeout: float = 30.0) -> None:  # fmt: skip
        """Prep `do`, then the command in the session's display: onto its output of the
        headless compositor (`sway`), else in its own process group with DISPLAY (and
        WAYLAND_DISPLAY on `wlr`). A game of this app waiting out its grace window is taken
        over instead. The entry's `detached` commands start after the prep steps, untracked;
        its `output` file takes the app's output (appfields.OutputError, an OSError, when it
        cannot be opened: the launch fails). `elevated` is reported and not honoured.
        Raises OSError or session_display.DisplayLaunchError."""
        if getattr(self.app, "elevated", False) or any(
            isinstance(p, dict) and p.get("elevated") for p in self.prep
        ):
            log.warning("app %r asks for `elevated`, which this host does not honour (%s); it "
                        "runs with the host's own rights", self.app.name,
                        appfields.ELEVATED_REASON)  # fmt: skip
        if not self.cmd and not self.prep and not self.detached:
            return
        if self.cmd and self.game.resume(self.app):
            self.resumed = True
            return
        env = apprun.session_env(os.environ, x_display=session_display.app_x_display(display),
                          app=self.app, client=client, mode=mode,
                          wayland=session_display.app_wayland_display(display))  # fmt: skip
        env.update(extra_env)
        out_fd = appfields.open_output(self.output) if self.output else None
        try:
            if self.prep:
                self.prepped = True
                prep.run_do(self.prep_key, self.prep, env)
            if self.detached:
                self.detached_pids = appfields.start_detached(
                    self.detached, env, self.app.working_dir, out_fd
                )
            if not self.cmd:
                return
            if display.get("backend") == "sway":
                own = {**apprun.app_vars(self.app, client, mode), **extra_env}
                cmd = self.cmd
                if self.output:  # sway runs `exec <cmd>`: the redirection applies to the app
                    cmd = f"{cmd} >>{shlex.quote(self.output)} 2>&1"
                self.proc = session_display.launch_in_compositor(
                    display, cmd, own, self.app.working_dir, self.app.exit_timeout, map_timeout
                )
            else:
                with session_display.placing(display, map_timeout):
                    self.proc = apprun.AppProcess(self.cmd, env, self.app.working_dir,
                                                  self.app.exit_timeout, out_fd)  # fmt: skip
        finally:
            if out_fd is not None:
                os.close(out_fd)  # the children hold their own copies
        self.game.launched(self.app, self.proc.pgid, self.prep_key if self.prep else None)

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc else None

    def exited(self) -> bool:
        """The session must end for its app (docs/library.md, "How an entry runs"):
        `session_on_game_exit` and the game the lifecycle layer saw exited; or the launched
        command is over (`appfields.exit_verdict`: with `wait-all` its whole group, else the
        command alone) and was not a launcher that detached (`auto-detach`: status 0 within
        the window). After a detach the session goes on with what the launcher started (the
        game the lifecycle layer finds) or, when nothing of it is ever seen, with the display.
        With `auto-detach` on, a game the lifecycle layer follows outside the launched group
        (a store client's hand-off) keeps the session too; with it off, the command's end
        ends the session whatever it left (see `_over`)."""
        if self.game.game_exit is not None and not (self.launcher_detached
                                                    and not self.game.game_seen):  # fmt: skip
            return True
        if self.resumed:  # its watcher may live in another process: read the record
            rec = game_registry.get(self.game.key or "")
            gone = rec is None or rec.get("state") == game_registry.EXITED
            return gone and game_settings.load().session_on_game_exit
        if self.proc is None:
            return False
        verdict = self.proc.verdict(self.auto_detach, self.wait_all)
        if verdict == appfields.DETACHED:
            if not self.launcher_detached:
                self.launcher_detached = True
                log.info("app %r exited with status 0 within %.0f s: a launcher that detached "
                         "(auto-detach); the session goes on", self.app.name,
                         appfields.AUTO_DETACH_WINDOW_S)  # fmt: skip
            return False
        if verdict == appfields.RUNNING:
            return False
        return self._over()

    def _over(self) -> bool:
        """The launched command is over: the session ends, unless the lifecycle layer still
        holds a game it found: one that just died (its watcher reports it within a poll, and
        the session ends through `session_on_game_exit` like any game's; SETTLE_S at most),
        or, with `auto-detach`, one alive outside the launched group (a launcher's hand-off)."""
        seen = self.game.seen_game()
        if seen is None:
            return True
        alive, inside = seen
        if not alive:
            self._settle_t0 = self._settle_t0 or time.monotonic()
            return time.monotonic() - self._settle_t0 > SETTLE_S
        return inside or not self.auto_detach

    def end(self, reason: str = "api", deliberate: bool = True) -> bool:
        """The session's end applied to the game (watch.CLOSE_REASONS close it, else the
        session settings); unless it lives on (kept, grace), the group is ended (SIGTERM, then
        SIGKILL after the entry's exit timeout), then the owed undos. True: it lives on."""
        lives_on = self.game.finish(reason in CLOSE_REASONS, deliberate)
        if self.proc is not None:
            if lives_on:
                self.proc.proc.poll()  # the game lives on in its own group; reap only
            else:
                self.proc.terminate()
        if self.prepped and not lives_on:
            prep.run_undo(self.prep_key)  # a no-op when the lifecycle layer already ran them
        return lives_on


class SessionCore:
    """One session's plane-independent state and steps. The plane calls, in order:
    `publish` (registry), `acquire_display`, `start_app`, `began`; while streaming
    `stream_began`/`stream_ended` (once per stream: each leaves its history record and webhook
    pair), `latency` per frame, `sample` once a second, `publish` as
    heartbeat; at the end `finish`. `totals` is the plane's counter reader:
    () -> (frames, bytes, [encode ms], [rtt ms]) over the whole session."""

    def __init__(self, plane: str, session_id: str, client: dict, width: int, height: int,
                 fps: int, app_key: str, app_title: str, remote: str = ""):  # fmt: skip
        self.plane, self.id = plane, str(session_id)
        self.client = client  # {name, fingerprint, uuid}
        self.width, self.height, self.fps = width, height, fps
        self.mode = f"{width}x{height}@{fps}"
        self.app_key, self.app_title, self.remote = app_key, app_title, remote
        self.t_start = datetime.now(UTC)
        self.t_created = time.time()
        self.state = "starting"
        self.extra: dict = {}  # the plane's own registry fields
        self.display: dict | None = None
        self.display_failed = False
        self.app: AppRun | None = None
        self.started = False  # session.started went out
        self.stream_t0: float | None = None
        self.stream_t1: float | None = None
        self.stream_start: datetime | None = None  # the open stream's wall-clock start
        # The totals and sample count when the last stream ended (zero before the first): the
        # open stream's record is the difference.
        self._base: tuple = (0, 0, (0, 0.0), (0, 0.0))
        self._sample_base = 0
        # Per-second samples: only as many as a history record keeps (an hour), plus running
        # (count, sum) tallies of the encode and RTT figures, which the record's averages need
        # over the whole stream. A list of every second grew 1.4 MB an hour (bench/soak.py).
        self.samples: deque[dict] = deque(maxlen=history.SAMPLES_MAX)
        self.sample_count = 0
        self.encode_tally = (0, 0.0)
        self.rtt_tally = (0, 0.0)
        self.error = ""
        self.totals = lambda: (0, 0, (0, 0.0), (0, 0.0))
        # What the stream encodes with: the codec negotiated and the encoder that opened
        # (`use_encoder`, the one place it is kept; the record and stream.started read it).
        self.codec = "h264"
        self.encoder = ""
        self._stats_failed = False
        self.finished = False
        # This session's own last minute, one point a second, published in its record: the
        # `streaming.stats` files hold one window per host, and several sessions may run.
        self.live: deque[dict] = deque(maxlen=LIVE_POINTS)
        self._second = {"frames": 0, "capture": 0.0, "t0": time.monotonic()}

    # -- identity and payloads -----------------------------------------------------------------
    @property
    def name(self) -> str:
        return self.client.get("name", "")

    @property
    def fingerprint(self) -> str:
        return self.client.get("fingerprint", "")

    def client_ref(self) -> dict:
        return {"name": self.name, "fingerprint": self.fingerprint,
                "client_id": registry.client_id(self.fingerprint), "plane": self.plane,
                "session_id": self.id}  # fmt: skip

    def session_ref(self) -> dict:
        return {"id": self.id, "client": self.name,
                "client_id": registry.client_id(self.fingerprint), "mode": self.mode,
                "hdr": False, "plane": self.plane}  # fmt: skip

    def stream_ref(self) -> dict:
        return {"mode": self.mode, "hdr": False, "client": self.name,
                "client_id": registry.client_id(self.fingerprint), "app": self.app_title,
                "plane": self.plane, "session_id": self.id}  # fmt: skip

    def emit(self, kind: str, **extra) -> None:
        """A client.*, session.* or stream.* event with this session's ref."""
        domain = kind.split(".")[0]
        ref = {"client": self.client_ref, "session": self.session_ref,
               "stream": self.stream_ref}[domain]()  # fmt: skip
        events.emit(kind, {domain: ref, **extra})

    # -- the registry ----------------------------------------------------------------------------
    def record(self) -> dict:
        return {
            "id": self.id,
            "plane": self.plane,
            "pid": os.getpid(),
            "state": self.state,
            "client": self.name,
            "client_id": registry.client_id(self.fingerprint),
            "fingerprint": self.fingerprint,
            "mode": self.mode,
            "width": self.width,
            "height": self.height,
            "fps": self.fps,
            "app": self.app_key,
            "app_title": self.app_title,
            "t_start": self.t_created,
            # What `recover_lost` hands back if the process dies without its own cleanup.
            "display_slot": (self.display or {}).get("slot"),
            **self.extra,
            "live": list(self.live),
        }

    def publish(self, **changes) -> None:
        """Register or refresh (the heartbeat, once a second) this session's record."""
        self.extra.update(changes)
        registry.put(self.record())

    # -- the steps -----------------------------------------------------------------------------
    def acquire_display(self, owner: str, *args) -> dict:
        """The session's virtual display (`displays.machine.acquire`); DisplayError is the
        plane's to answer, and `finish` still tells the operator (session.ended)."""
        try:
            self.display = machine.acquire(owner, self.mode, *args)
        except machine.DisplayError:
            self.display_failed = True
            raise
        return self.display

    def start_app(self, app, extra_env: dict, map_timeout: float) -> AppRun:
        """Prep `do`, the app and its game (see AppRun.start)."""
        self.app = AppRun(app, self.id, self.name, self.plane)
        client = {"name": self.name, "fingerprint": self.fingerprint,
                  "uuid": self.client.get("uuid", "")}  # fmt: skip
        mode = (self.width, self.height, self.fps)
        self.app.start(self.display, extra_env, client, mode, map_timeout)
        return self.app

    def began(self) -> None:
        """Everything is up: session.started."""
        self.t_start = datetime.now(UTC)
        self.started = True
        self.emit("session.started")

    def use_encoder(self, codec: str | None = None, encoder: str | None = None,
                    where: dict | None = None, options: dict | None = None) -> None:  # fmt: skip
        """The stream's codec and the encoder open now (and, for GET /gpus `active`, where it
        runs: `{"backend", "gpu_id"}`; for GET /streams, the FFmpeg `options` it was given); a
        hand-over to another encoder calls this again."""
        if options is not None:
            self.extra["encoder_options"] = options
        if codec:
            self.codec = codec
        if encoder:
            self.encoder = encoder
        if where is not None:
            self.extra["encoder"] = where
        self.extra.update(codec=self.codec, encoder_name=self.encoder)

    def follow_encoder(self, codec: str, encoder: str, options: dict) -> None:
        """What a plane's stream says is open now, each second: recorded when it is new (the
        stream's first second, or a hand-over), with where it runs (`encoding.where` may probe
        the GPUs: off an event loop)."""
        if encoder and (encoder, options) != (self.encoder, self.extra.get("encoder_options")):
            self.use_encoder(codec, encoder, encoding.where(encoder), options)

    def stream_began(self, codec: str | None = None, encoder: str | None = None,
                     where: dict | None = None) -> None:  # fmt: skip
        """The first video of a stream reached the client (client connected): stream.started
        (naming the codec and the encoder that opened) and the `stream.start` webhook. Each
        stream (a launch, every resume) is its own."""
        if codec or encoder or where is not None:
            self.use_encoder(codec, encoder, where)
        if self.stream_t0 is not None and self.stream_t1 is None:
            return
        self.stream_t0, self.stream_t1 = time.monotonic(), None
        self.stream_start = datetime.now(UTC)
        self.emit("stream.started", codec=self.codec, encoder=self.encoder)
        stream_webhooks.notify(stream_webhooks.START, self.record_fields())

    def stream_ended(self) -> None:
        """The client is gone (stopped, vanished, or the session ends): stream.stopped, then
        this stream's history record and `stream.end` webhook at once, whether or not the
        session (a `keep` app waiting for a resume) goes on."""
        if self.stream_t0 is None or self.stream_t1 is not None:
            return
        self.stream_t1 = time.monotonic()
        self.emit("stream.stopped")
        record = self.record_fields()
        fresh = min(self.sample_count - self._sample_base, len(self.samples))
        samples = list(self.samples)[len(self.samples) - fresh :]
        # The next stream (a resume) counts from here: nothing is sent between streams.
        self._base, self._sample_base = self._counts(), self.sample_count
        fields = {k: v for k, v in record.items() if k not in ("t_start", "t_end")}
        try:
            history.record_session(t_start=self.stream_start, t_end=datetime.now(UTC),
                                   samples=samples, plane=self.plane,
                                   client_fingerprint=self.fingerprint, **fields)  # fmt: skip
        except Exception:
            log.exception("session %s: history record not written", self.id)
        stream_webhooks.notify(stream_webhooks.END, record)

    def _record_refusal(self) -> None:
        """A session refused before it streamed (the client asked for a stream the host does
        not make) still leaves a history record: no frames, and `error` saying what and why."""
        fields = {k: v for k, v in self.record_fields().items() if k not in ("t_start", "t_end")}
        try:
            history.record_session(t_start=self.t_start, t_end=datetime.now(UTC), samples=[],
                                   plane=self.plane, client_fingerprint=self.fingerprint,
                                   **fields)  # fmt: skip
        except Exception:
            log.exception("session %s: history record not written", self.id)

    def _counts(self) -> tuple:
        """The plane's totals so far: frames, bytes, (count, sum) of encode and RTT samples."""
        return self.totals()

    def _stats(self, fn, *args, **kwargs) -> None:
        """Live statistics are a view: a failure is logged once and never ends the stream."""
        try:
            fn(*args, **kwargs)
        except Exception:
            if not self._stats_failed:
                self._stats_failed = True
                log.exception("live stream statistics failed")

    def latency(self, capture_ms: float, encode_ms: float) -> None:
        """One frame's capture and encode time, for `/api/stream/latency`."""
        second = self._second
        second["frames"] += 1
        second["capture"] += capture_ms if isinstance(capture_ms, int | float) else 0.0
        self._stats(stats.record_latency, capture_ms, encode_ms, session=self.id)

    def sample(self, bitrate_kbps: float, rtt_ms, encode_ms, target_kbps=None,
               loss_pct=None, **extra) -> dict:  # fmt: skip
        """One second's figures: `/api/stream/network`, the history record's samples and the
        session's live point (`live_point`). `loss_pct`: None when the plane cannot tell."""
        self._stats(stats.record_network, session=self.id, rtt_ms=rtt_ms, loss_pct=loss_pct,
                    bitrate_kbps=bitrate_kbps, target_kbps=target_kbps)  # fmt: skip
        self._stats(self.live_point, bitrate_kbps, rtt_ms, encode_ms, target_kbps, loss_pct)
        s = {
            "t": round(time.time() - self.t_start.timestamp(), 1),
            "bitrate_kbps": round(bitrate_kbps, 1),
            "rtt_ms": rtt_ms,
            "encode_ms": round(encode_ms, 2) if encode_ms is not None else None,
            **extra,
        }
        self.samples.append(s)
        self.sample_count += 1
        if isinstance(encode_ms, int | float):
            self.encode_tally = (self.encode_tally[0] + 1, self.encode_tally[1] + encode_ms)
        if isinstance(rtt_ms, int | float):
            self.rtt_tally = (self.rtt_tally[0] + 1, self.rtt_tally[1] + rtt_ms)
        return s

    def live_point(self, bitrate_kbps, rtt_ms, encode_ms, target_kbps, loss_pct) -> dict:
        """Close this second: the frames the session really encoded per second (counted from
        `latency`, one call a frame), its capture and encode times, bitrate against target,
        RTT and loss. Published with the next heartbeat."""
        now, second = time.monotonic(), self._second
        span = max(now - second["t0"], 1e-3)
        frames = second["frames"]

        def num(value, digits=1):
            return round(float(value), digits) if isinstance(value, int | float) else None

        point = {
            "ts_ms": int(time.time() * 1000),
            "fps": round(frames / span, 1),
            "bitrate_kbps": num(bitrate_kbps),
            "target_kbps": num(target_kbps),
            "loss_pct": num(loss_pct, 2),
            "rtt_ms": num(rtt_ms, 2),
            "encode_ms": num(encode_ms, 2),
            "capture_ms": round(second["capture"] / frames, 2) if frames else None,
        }
        self.live.append(point)
        self._second = {"frames": 0, "capture": 0.0, "t0": now}
        return point

    def record_fields(self) -> dict:
        """The open (or last) stream's history record and webhook body
        (hooks.stream_webhooks.RECORD_FIELDS): its own span and figures, the totals since it
        began."""
        frames, nbytes, enc, rtt = self.totals()
        f0, b0, e0, r0 = self._base
        frames, nbytes = frames - f0, nbytes - b0
        enc_n, enc_sum = enc[0] - e0[0], enc[1] - e0[1]
        rtt_n, rtt_sum = rtt[0] - r0[0], rtt[1] - r0[1]
        span = 0.0
        if self.stream_t0 is not None:
            span = (self.stream_t1 or time.monotonic()) - self.stream_t0
        return {
            "session_id": self.id,
            "t_start": (self.stream_start or self.t_start).isoformat(),
            "t_end": datetime.now(UTC).isoformat(),
            "app_name": self.app_title,
            "client_name": self.name,
            "client_address": self.remote,
            "codec": self.codec,
            "encoder": self.encoder,
            "width": self.width,
            "height": self.height,
            "fps": self.fps,
            "avg_bitrate_kbps": round(nbytes * 8 / 1000 / span, 1) if span > 0 else 0.0,
            "avg_rtt_ms": round(rtt_sum / rtt_n, 2) if rtt_n > 0 else 0.0,
            "avg_encode_ms": round(enc_sum / enc_n, 2) if enc_n > 0 else 0.0,
            # Frames the target rate owed but the sender did not deliver (behind or capture late).
            "dropped_frames": max(0, int(span * self.fps) - frames) if span > 0 else 0,
            "error": self.error,
        }

    def finish(self, reason: str, deliberate: bool, user_stop: bool = False) -> None:
        """The end, after the plane stopped its transport: a stream still open ends (its
        record, `stream.end`), the game (closed, kept or in its grace window) and its group,
        `undo` steps, the display back to its policy, session.ended. Safe after a partial
        start; runs once. Every end but `watch.CLIENT_REASONS` is deliberate (no display
        linger); a client's user stop (`user_stop`) is deliberate for the title only (the
        client left, the operator did not end anything)."""
        if self.finished:
            return
        self.finished = True
        self.stream_ended()
        if reason == "refused" and self.stream_t0 is None:
            self._record_refusal()
        self._stats(stats.reset, self.id)
        deliberate = deliberate or reason not in CLIENT_REASONS
        title_deliberate = deliberate or user_stop
        if self.app is not None:
            try:
                self.app.end(reason, title_deliberate)
            except Exception:  # the display must still be released
                log.exception("session %s: ending the app failed", self.id)
        if self.display is not None:
            try:
                machine.disconnect(self.display["slot"], deliberate=deliberate)
            except Exception as exc:  # the display may be gone already
                log.warning("display slot %s: %s", self.display.get("slot"), exc)
        with contextlib.suppress(Exception):
            registry.remove(self.id)
        if self.started or self.display_failed:
            # Without session.started (the display refused), the operator still learns why.
            ended = {"reason": reason}
            if self.error:
                ended["error"] = self.error  # e.g. display_lost: which display, what happened
            self.emit("session.ended", **ended)
        log.info("%s session %s ended (%s)", self.plane, self.id, reason)


def recover_lost(pid: int, signum: int) -> list[str]:
    """The cleanup a session process could not run: it was killed outright (`kill -9`, the
    OOM killer, a crash in C), so `finish` never ran. The session manager forks this when it
    reaps such a process; each record that process left in the registry is handed back
    (`_hand_back`). Returns the ids it recovered."""
    try:
        how = signal.Signals(signum).name
    except ValueError:
        how = f"signal {signum}"
    return [_hand_back(rec, f"the session process (pid {pid}) was killed by {how}")
            for rec in registry.records_of(pid)]  # fmt: skip


def _hand_back(rec: dict, error: str) -> str:
    """From a dead session's record: its title is closed (its group ended: no session is left
    to show it), owed `undo` steps run, its display goes back deliberately (torn down), the
    processes it owned and recorded (`owned_pids`: a sound server of its own) are killed, its
    null sink in a sound server it did not start is unloaded (`sound_sink`),
    the record and slot claim go, and `session.ended` says `session_lost` and why."""
    sid, plane, slot = str(rec["id"]), rec.get("plane") or "compat", rec.get("display_slot")
    steps = (
        (
            "title",
            lambda: (
                game_lifecycle.close_game(session_id=sid),
                game_lifecycle.session_ended(sid, True),
            ),
        ),
        ("undo steps", lambda: prep.run_undo(f"{plane}-session-{sid}")),
        ("display", lambda: slot is not None and machine.disconnect(int(slot), deliberate=True)),
        ("owned processes", lambda: [_kill(p) for p in rec.get("owned_pids") or []]),
        ("sound sink", lambda: sound.unload_sink(rec.get("sound_sink"))),
        ("slot claim", lambda: admission.release_slot(sid, None)),
        ("record", lambda: registry.remove(sid)),
    )
    for step, fn in steps:
        try:
            fn()
        except Exception:  # the other steps must still run
            log.exception("session %s lost: handing back its %s failed", sid, step)
    client = {"name": rec.get("client", ""), "fingerprint": rec.get("fingerprint", "")}
    core = SessionCore(plane, sid, client, int(rec.get("width") or 0),
                       int(rec.get("height") or 0), int(rec.get("fps") or 0),
                       str(rec.get("app", "")), rec.get("app_title", ""))  # fmt: skip
    core.emit("session.ended", reason="session_lost", error=error)
    log.warning("%s session %s lost: %s", plane, sid, error)
    return sid


def _kill(pid) -> None:
    if isinstance(pid, int) and pid > 1:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
