"""One GameStream stream on real sockets: RTSP, ENet control, video and audio (no Django).

This is the transport half of the engine: it binds the four listeners for one armed launch,
walks the client through the RTSP handshake (:mod:`compat.rtsp`), binds its ENet
peer by the connect data, finds its video/audio endpoints from the pings, then encodes frames
from ``frame_source`` at the negotiated rate and sends them with FEC, plus the session's sound
(``audio_source``, see :mod:`media.audiofeed`) or CBR Opus silence without one.

Threads, each owning its socket: RTSP accept loop (plus one short-lived handler per RTSP
connection, which owns and closes that connection), ENet service loop, video sender, audio
sender. They share only flags and counters (and the RTSP state machine, under a lock).
``stop()`` sends the graceful termination message, then joins everything before it closes any
socket; every thread also ends on its own when the client goes away
(ENet disconnect, control timeout, a control message failing authentication).

Everything listens to one client IP (``launch.client_ip``, else the first RTSP peer): RTSP
connections and ENet connects from elsewhere are dropped, and the video/audio destination
follows :mod:`compat.endpoint`'s ping rules; a live stream never changes address.

What the caller (``compat.session``, in its session's process) supplies: the
launch's secrets and mode, a ``frame_source`` (the capture backend's frames), and ``on_event``
to turn lifecycle moments into host events (``client.connected``, ``stream.started``, ...).
"""

from __future__ import annotations

import contextlib
import errno
import json
import logging
import socket
import struct
import threading
import time
import weakref
from collections.abc import Callable

import numpy as np

from compat import control, endpoint, rtsp
from compat.audio import AudioPacketizer, OpusSilence
from compat.enet_transport import EnetHost
from compat.engine import adaptive, encryption, recovery
from compat.engine.frameclock import FrameClock
from compat.engine.launch import InputSink, Launch, SessionStats, rikeyid_from_iv
from compat.video import FRAME_TYPE_IDR, FRAME_TYPE_P, VideoPacketizer
from media import pacing
from media.audio import layouts
from media.encoder import EncoderFailed, VideoEncoder

__all__ = ["InputSink", "Launch", "SessionStats", "StreamSession", "rikeyid_from_iv"]

log = logging.getLogger("compat.engine")

PING_WAIT_S = 10.0  # the client's video/audio pings must arrive within this
RTSP_MAX_CONNECTIONS = 8  # served at once; the oldest is dropped for a newcomer
RTSP_READ_DEADLINE_S = 3.0  # a whole request must arrive within this after connect
RTSP_POLL_S = 0.1  # how often a waiting handler looks at the stop and evict flags
PACING_BATCH = 64  # most datagrams sent back to back in one pacing slot
PACING_SLOT_S = 0.001
SO_BUSY_POLL = 46  # linux/socket.h; not exported by Python's socket module
TOS_VIDEO = 0xA0  # DSCP CS5
TOS_AUDIO = 0xB8  # DSCP EF
MAX_DRAIN = 64  # most datagrams read off a media socket between two sends


BIG_BUFFER = 4 << 20


def grow_buffers(sock: socket.socket) -> None:
    """Ask for 4 MiB send and receive buffers (`enet_4mib_buffer`): a keyframe burst or a
    stall must not overflow the kernel's default ~200 KiB; the kernel caps what it grants."""
    for opt in (socket.SO_SNDBUF, socket.SO_RCVBUF):
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.SOL_SOCKET, opt, BIG_BUFFER)


UDP_SEGMENT = 103  # linux/udp.h: UDP generic segmentation offload (Linux 4.18)
GSO_MAX_SEGMENTS = 64  # the kernel's UDP_MAX_SEGMENTS
GSO_MAX_BYTES = 65_000  # one UDP payload carries the whole batch
_NO_GSO: weakref.WeakSet = weakref.WeakSet()  # sockets whose route refused it


def send_datagrams(sock: socket.socket, rows: np.ndarray, addr: tuple[str, int]) -> None:
    """Send each row of `rows` (C-contiguous, equal sizes) as one datagram.

    Batched with UDP GSO: one `sendmsg` hands the kernel up to 46 rows of 1408 bytes and
    the kernel cuts them into the very datagrams a per-row loop sends (same bytes, same
    order), so the Python loop and the syscall run per batch, not per datagram.
    A socket whose route refuses GSO (no checksum offload: EIO; an old kernel: EINVAL/
    ENOPROTOOPT) falls back to one `sendto` per row, for good. A full socket buffer drops
    what did not fit, on either path."""
    rows = np.ascontiguousarray(rows)
    n, size = rows.shape if rows.ndim == 2 else (0, 0)
    per = min(GSO_MAX_SEGMENTS, GSO_MAX_BYTES // size) if size else 0
    first = 0
    if n > 1 and per > 1 and sock not in _NO_GSO:
        control = [(socket.SOL_UDP, UDP_SEGMENT, struct.pack("=H", size))]
        try:
            for first in range(0, n, per):
                with contextlib.suppress(BlockingIOError):
                    sock.sendmsg([rows[first : first + per]], control, 0, addr)
            return
        except OSError as exc:
            if exc.errno not in (errno.EIO, errno.EINVAL, errno.ENOPROTOOPT, errno.EOPNOTSUPP):
                raise
            _NO_GSO.add(sock)  # this batch and everything after it: one datagram at a time
    for row in rows[first:]:
        with contextlib.suppress(BlockingIOError):
            sock.sendto(row, addr)


class StreamSession:
    def __init__(
        self,
        launch: Launch,
        frame_source: Callable[[int, int], np.ndarray],
        on_event: Callable[..., None] | None = None,
        input_sink: InputSink | None = None,
        audio_source: Callable[..., object] | None = None,
    ):
        self.launch = launch
        # audio_source(packet_ms, bitrate, layout) -> object with next_packets()
        # (media.audiofeed; layout: the stream's media.audio.layouts.OpusConfig);
        # None sends CBR silence.
        self.audio_source = audio_source
        self.frame_source = frame_source
        self.on_event = on_event or (lambda kind, **data: None)
        self.input_sink = input_sink
        policy = encryption.Policy(launch.encryption_mode, launch.rtsp_encryption)
        offered = policy.offered
        if launch.offer_video_encryption:
            offered |= rtsp.ENC_VIDEO
        self.rtsp = rtsp.RtspSession(
            launch.video_port,
            launch.audio_port,
            launch.control_port,
            launch.ping_payload,
            launch.connect_data,
            encryption_supported=offered,
            encryption_requested=policy.requested,
            encryption_required=policy.required,
            key=launch.rikey if launch.rtsp_encryption else None,
            offer=launch.offer,
        )
        self.stats = SessionStats()
        # Datagrams sent and reported lost (0x5502): loss_pct, and the adaptive bitrate's input.
        self.loss = adaptive.LossMeter()
        # Reference-frame invalidation requests, judged and answered with an IDR.
        self.recovery = recovery.Recovery(self.stats.recovery)
        # The only peer served (compat.endpoint); media endpoints appear at ANNOUNCE.
        self.client = endpoint.SessionClient(launch.client_ip)
        self.endpoints: dict[str, endpoint.MediaEndpoint] = {}
        self.stop_reason: str | None = None
        self._stop = threading.Event()
        self._announced = threading.Event()
        self._idr = threading.Event()
        self._peer = None
        self._threads: list[threading.Thread] = []
        self._rtsp_lock = threading.Lock()
        # The video pacer's rate: max_send_mbps until the client's address (so its link) is
        # known, then pacing.pacing_for() adds rate_cap_pct of that link's speed.
        self.pace_mbps = float(launch.max_send_mbps or 0.0)
        self.rtsp_dropped = 0  # connections dropped without a reply (silent, slow, crowded)
        self._cipher = control.ControlCipher(launch.rikey)
        opened: list[socket.socket] = []
        try:
            self._rtsp_sock = socket.create_server((launch.host, launch.rtsp_port))
            opened.append(self._rtsp_sock)
            self._rtsp_sock.settimeout(0.2)
            self._video_sock = self._udp(launch.video_port, TOS_VIDEO)
            opened.append(self._video_sock)
            self._audio_sock = self._udp(launch.audio_port, TOS_AUDIO)
            opened.append(self._audio_sock)
            self._enet = EnetHost(launch.control_port, launch.host)
        except OSError:
            for s in opened:  # a port in use must not leak the listeners already bound
                s.close()
            raise

    def _udp(self, port: int, tos: int) -> socket.socket:
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        s.bind((self.launch.host, port))
        s.settimeout(0.2)
        if self.launch.big_buffers:
            grow_buffers(s)
        if self.launch.dscp_qos:
            with contextlib.suppress(OSError):
                s.setsockopt(socket.IPPROTO_IP, socket.IP_TOS, tos)
        if self.launch.busy_poll_us:
            with contextlib.suppress(OSError):  # needs CAP_NET_ADMIN above the sysctl default
                s.setsockopt(socket.SOL_SOCKET, SO_BUSY_POLL, self.launch.busy_poll_us)
        return s

    def _send_video(self, rows: np.ndarray, addr: tuple[str, int]) -> None:
        mbps = self.pace_mbps
        if not mbps:
            send_datagrams(self._video_sock, rows, addr)
            return
        # ~1 ms slots at the pacer's rate (Sunshine's shape), 1..PACING_BATCH datagrams each.
        # A short oversleep is caught up by the next slot; a longer one (more than a slot
        # behind) moves the schedule instead, so a late wake-up never turns into a burst.
        bytes_per_s = mbps * 1e6 / 8
        batch = max(1, min(PACING_BATCH, int(bytes_per_s * PACING_SLOT_S / rows.shape[1])))
        slot_s = batch * rows.shape[1] / bytes_per_s
        due = time.monotonic()
        for first in range(0, rows.shape[0], batch):
            send_datagrams(self._video_sock, rows[first : first + batch], addr)
            due += slot_s
            delay = due - time.monotonic()
            if delay > 0:
                time.sleep(delay)
            elif delay < -slot_s:
                due = time.monotonic()

    # ---- lifecycle ----

    def start(self) -> None:
        for target in (self._rtsp_loop, self._control_loop, self._video_loop, self._audio_loop):
            t = threading.Thread(target=target, name=f"gs-{target.__name__}", daemon=True)
            t.start()
            self._threads.append(t)

    def stop(self, reason: str = "host") -> None:
        if self.stop_reason is None:
            self.stop_reason = reason
        self._stop.set()
        for t in self._threads:
            if t is not threading.current_thread():
                t.join(timeout=5)
        for s in (self._rtsp_sock, self._video_sock, self._audio_sock):
            s.close()
        self._enet.close()

    def _end(self, reason: str) -> None:
        """A worker thread decided the session is over."""
        if self.stop_reason is None:
            self.stop_reason = reason
        self._stop.set()

    @property
    def running(self) -> bool:
        return not self._stop.is_set()

    # ---- RTSP: one request per connection, reply, close ----

    def _rtsp_loop(self) -> None:
        """Accept RTSP connections and serve each on its own short-lived thread.

        Moonlight opens a new TCP connection per request (OPTIONS, DESCRIBE, SETUP x3,
        ANNOUNCE, PLAY), so a client that connects and stays silent must not hold the
        listener: at most ``RTSP_MAX_CONNECTIONS`` are served at once, each within
        ``RTSP_READ_DEADLINE_S`` and ``rtsp.MAX_REQUEST_BYTES``; when all slots are taken the
        oldest connection is dropped for the new one. Every handler closes its own socket;
        this loop joins them all before it returns (stop() joins this loop).
        """
        handlers: list[_RtspConn] = []
        try:
            while not self._stop.is_set():
                try:
                    conn, peer = self._rtsp_sock.accept()
                except (TimeoutError, OSError):
                    handlers = [h for h in handlers if h.thread.is_alive()]
                    continue
                handlers = [h for h in handlers if h.thread.is_alive()]
                serving = [h for h in handlers if not h.evict.is_set()]
                if len(serving) >= RTSP_MAX_CONNECTIONS:
                    serving[0].evict.set()  # the oldest (slowest) makes room
                if len(handlers) >= 2 * RTSP_MAX_CONNECTIONS:
                    conn.close()  # evicted ones still winding down: refuse, stay bounded
                    with self._rtsp_lock:
                        self.rtsp_dropped += 1
                    continue
                h = _RtspConn(conn, peer[0])
                h.thread = threading.Thread(
                    target=self._rtsp_serve, args=(h,), name="gs-rtsp-conn", daemon=True
                )
                handlers.append(h)
                h.thread.start()
        finally:
            for h in handlers:
                h.thread.join()  # each ends within RTSP_POLL_S of the stop flag

    def _rtsp_serve(self, h: _RtspConn) -> None:
        with h.conn as conn:  # only this thread ever closes it
            if not self.client.admit("RTSP", h.ip, pin=True):
                with self._rtsp_lock:
                    self.rtsp_dropped += 1  # another address: closed without a reply
                return
            data = b""
            deadline = time.monotonic() + RTSP_READ_DEADLINE_S
            try:
                conn.settimeout(RTSP_POLL_S)
                while not rtsp.request_complete(data) and len(data) <= rtsp.MAX_REQUEST_BYTES:
                    if self._stop.is_set() or h.evict.is_set() or time.monotonic() > deadline:
                        with self._rtsp_lock:
                            self.rtsp_dropped += 1  # silent, slow or crowded out: no reply
                        return
                    try:
                        chunk = conn.recv(rtsp.MAX_REQUEST_BYTES + 1 - len(data))
                    except TimeoutError:
                        continue
                    if not chunk:
                        if not data:
                            return
                        break
                    data += chunk
                # Oversized requests get rtsp's 413 and the connection closes.
                with self._rtsp_lock:  # one state machine for all connections
                    reply = self.rtsp.handle(data)
                    if self.rtsp.params is not None:
                        self._announced.set()
                conn.settimeout(RTSP_POLL_S * 10)
                conn.sendall(reply)
            except OSError:
                return
            finally:
                if self.rtsp.refused:  # the refusal went out (or could not): the session is over
                    log.warning("session refused: %s", self.rtsp.refused)
                    self._end(self.rtsp.refused_as or "encryption_required")

    # ---- control: ENet + AES-GCM ----

    def _control_loop(self) -> None:
        last_seen = time.monotonic()
        while not self._stop.is_set():
            ev = self._enet.service(10)
            now = time.monotonic()
            if ev is None:
                if self._peer is not None and now - last_seen > self.launch.control_timeout_s:
                    self.on_event("client.disconnected", reason="timeout")
                    self._end("timeout")
                continue
            if ev.kind == "connect":
                if (
                    not self.client.admit("control stream", ev.address)
                    or ev.connect_data != self.launch.connect_data
                    or self._peer is not None
                ):
                    self._enet.disconnect_now(ev.peer)
                    continue
                self._peer = ev.peer
                self.on_event("client.connected")
            elif not _same_peer(ev.peer, self._peer):
                continue
            elif ev.kind == "disconnect":
                self.on_event("client.disconnected", reason="disconnected")
                self._end("client")
                break
            else:
                try:
                    msg_type, payload = self._cipher.open(ev.data)
                    actions = control.interpret(msg_type, payload)
                except control.ControlError as e:
                    log.warning("control stream: %s", e)
                    self._end("protocol_error")
                    break
                if actions.idr_requested:
                    self._idr.set()
                    if self.stats.frames_sent:  # after the start message: a frame was lost
                        self.loss.frame_lost()
                if actions.invalidation is not None:
                    rfi = actions.invalidation
                    if self.recovery.request(rfi.first_frame, rfi.last_frame, now) == "idr":
                        self.loss.frame_lost()
                if actions.fec_status is not None:
                    self.loss.fec_status(actions.fec_status)
                if actions.input_data is not None and self.input_sink is not None:
                    try:
                        self.input_sink.handle(actions.input_data)
                    except Exception:  # an input bug must not end the stream
                        log.exception("input sink failed")
                if actions.ping:
                    with contextlib.suppress(AttributeError):
                        self.stats.rtt_ms.append(int(ev.peer.roundTripTime))
            last_seen = now
        if self.input_sink is not None:
            with contextlib.suppress(Exception):
                self.input_sink.disconnect()  # release held keys/buttons, unplug pads
        if self._peer is not None and self.stop_reason == "host":
            # Termination, then no ENet disconnect: MCC drops the peer itself on receipt,
            # and a disconnect overtaking the message reads as an error (-1) on its side.
            self._enet.send(self._peer, self._cipher.termination())
            self._enet.flush()
            deadline = time.monotonic() + 0.3  # let ENet see the ack (or retransmit)
            while time.monotonic() < deadline:
                self._enet.service(10)

    # ---- media endpoints ----

    def _endpoint(self, kind: str) -> endpoint.MediaEndpoint:
        """The ping rules for one media port, once the ANNOUNCE said what the client sends."""
        ep = endpoint.MediaEndpoint(
            kind,
            self.client.ip,
            self.launch.ping_payload,
            legacy_ok=not endpoint.payload_pings_required(self.rtsp.params.ml_feature_flags),
        )
        self.endpoints[kind] = ep
        return ep

    def _await_ping(self, sock: socket.socket, ep: endpoint.MediaEndpoint) -> bool:
        """Wait for the client's first acceptable ping on ``sock``; False when none came."""
        deadline = time.monotonic() + PING_WAIT_S
        while not self._stop.is_set() and time.monotonic() < deadline:
            try:
                data, addr = sock.recvfrom(64)
            except (TimeoutError, OSError):
                continue
            if ep.offer(data, addr):
                return True
        return False

    @staticmethod
    def _drain(sock: socket.socket, ep: endpoint.MediaEndpoint) -> None:
        """Read what arrived on a non-blocking media socket (bounded: a flood must not stall
        the sender); the endpoint ignores all but the client's own pings."""
        for _ in range(MAX_DRAIN):
            try:
                data, addr = sock.recvfrom(64)
            except OSError:  # BlockingIOError: nothing left
                return
            ep.offer(data, addr)

    def _video_loop(self) -> None:
        while not self._announced.wait(0.2):
            if self._stop.is_set():
                return
        params = self.rtsp.params
        video = self._endpoint("video")
        if not self._await_ping(self._video_sock, video):
            if not self._stop.is_set():
                self._end("no_video_ping")
            return
        rate = adaptive.AdaptiveRate(
            self.loss,
            self.launch.video_kbps(params.bitrate_kbps),
            self.launch.adaptive_min_kbps,
            self.launch.adaptive_max_kbps,
            self.launch.fec_percentage,
        )
        if not self.launch.adaptive_bitrate:  # fixed: the negotiated rate, the configured FEC
            rate.floor = rate.ceiling = rate.kbps = self.launch.video_kbps(params.bitrate_kbps)
        self.stats.target_kbps, self.stats.fec_pct = rate.kbps, rate.fec_pct
        codec = params.codec  # offered (the ANNOUNCE check), so exactly what the client decodes
        try:
            encoder = VideoEncoder(
                params.width,
                params.height,
                params.fps,
                bitrate_kbps=rate.current.encoder_kbps,
                codec=self.launch.codec if codec == "h264" else codec,
                max_ref_frames=max(params.max_ref_frames, 1),
                threads=self.launch.encoder_threads,
                tuning=self.launch.encoder_tuning,
                candidates=self.launch.encoders.get(codec),
                config=self.launch.encoder_config,
            )
        except (EncoderFailed, ValueError) as exc:
            # A mode no encoder of this codec opens (odd size, too large for it): a clear end.
            log.warning("no %s encoder for %dx%d@%d: %s", codec, params.width, params.height,
                        params.fps, exc)  # fmt: skip
            self._end("encoder_failed")
            return
        self.stats.codec, self.stats.encoder = codec, encoder.codec_name
        self.stats.encoder_options = dict(encoder.options)
        self.stats.encoder_threads = encoder.thread_count
        packetizer = VideoPacketizer(
            packet_size=params.packet_size,
            fec_percentage=self.launch.fec_percentage,
            min_required_fec_packets=params.min_fec_packets,
            encryption_key=self.launch.rikey if params.video_encrypted else None,
        )
        self.pace_mbps = self.stats.pace_mbps = pacing.pacing_for(
            video.addr[0], self.launch.max_send_mbps, self.launch.rate_cap_pct
        )
        self._video_sock.setblocking(False)
        interval = self.recovery.frame_s = 1.0 / params.fps
        self.recovery.swap = params.max_ref_frames != 0  # 0: the client's decoder takes RFI
        epoch = time.monotonic()
        schedule = FrameClock(interval, epoch)
        cpu, wall = self.stats.stage_cpu.seconds, self.stats.stage_cpu.wall
        clock = time.process_time
        try:
            while not self._stop.is_set():
                if self._idr.is_set() or self.recovery.due(
                    time.monotonic(), self.stats.rtt_ms.last
                ):
                    self._idr.clear()
                    encoder.request_idr()
                c0, w0 = clock(), time.perf_counter()
                bgra = self.frame_source(params.width, params.height)
                c1, start = clock(), time.perf_counter()
                try:
                    yuv = encoder.convert(bgra)
                    c2 = clock()
                    frame = encoder.encode_yuv(yuv, start)
                except EncoderFailed as exc:
                    log.warning("video encoding failed: %s", exc)
                    self._end("encoder_failed")
                    break
                c3, w3 = clock(), time.perf_counter()
                wall["capture"] += start - w0
                wall["convert+encode"] += w3 - start
                cpu["capture"] += c1 - c0
                cpu["convert"] += c2 - c1
                cpu["encode"] += c3 - c2
                self.stats.stage_cpu.frames += 1
                self.stats.encoder = encoder.codec_name  # a hand-over shows here
                self.stats.encoder_options = encoder.options
                self._drain(self._video_sock, video)  # the port may still move, until now
                if frame is not None:
                    ts = int((time.monotonic() - epoch) * 90000)
                    index = packetizer.frame_index
                    c0, sealed0 = clock(), packetizer.encrypt_cpu_s
                    rows = packetizer.packetize(
                        frame.data,
                        FRAME_TYPE_IDR if frame.keyframe else FRAME_TYPE_P,
                        ts,
                        latency_01ms=int(frame.encode_ms * 10),
                    )
                    now = time.monotonic()
                    rows = self.recovery.reorder(rows, packetizer.first_block_data, now)
                    c1, sealed = clock(), packetizer.encrypt_cpu_s - sealed0
                    self._send_video(rows, video.addr)
                    cpu["packetize_fec"] += c1 - c0 - sealed
                    cpu["encrypt"] += sealed
                    cpu["send"] += clock() - c1
                    self.recovery.sent(index, frame.keyframe, now)
                    self.loss.sent_datagrams(rows.shape[0])
                    video.went_live()  # from here on the destination never changes
                    self.stats.frames_sent += 1
                    self.stats.idr_frames += frame.keyframe
                    self.stats.bytes_sent += rows.nbytes
                    self.stats.encode_ms.append(frame.encode_ms)
                    if self.stats.frames_sent == 1:
                        self.on_event("stream.started", codec=codec, encoder=encoder.codec_name)
                if self.launch.adaptive_bitrate:
                    self._adapt(rate, encoder, packetizer)
                wall["frame"] += time.perf_counter() - w0
                delay = schedule.wait_s(time.monotonic())
                if delay:
                    time.sleep(delay)
        finally:
            encoder.close()
            figures = self.stats.stage_cpu.per_frame_ms()
            log.info("video CPU per frame over %d frames, RTSP port %d, %d schedule restarts "
                     "(ms): %s", self.stats.stage_cpu.frames, self.launch.rtsp_port,
                     schedule.restarts, json.dumps(figures))  # fmt: skip
            self.on_event("stream.stopped")

    def _adapt(self, rate: adaptive.AdaptiveRate, encoder, packetizer) -> None:
        """At most once a second: the client's losses move the rate and the FEC share."""
        if self.stats.rtt_ms:
            rate.rtt(self.stats.rtt_ms.last)
        change = rate.tick()
        if change is None:
            return
        took_ms = encoder.set_bitrate(change.encoder_kbps)
        packetizer.fec_percentage = change.fec_pct
        self.stats.target_kbps, self.stats.fec_pct = change.kbps, change.fec_pct
        self.stats.rate_changes += 1
        log.info(
            "adaptive bitrate: %d kbps, FEC %d %% (loss %.1f %%, encoder reopened in %.1f ms)",
            change.kbps, change.fec_pct, rate.last_loss_pct, took_ms,
        )  # fmt: skip

    def _audio_loop(self) -> None:
        while not self._announced.wait(0.2):
            if self._stop.is_set():
                return
        params = self.rtsp.params
        audio = self._endpoint("audio")
        if not self._await_ping(self._audio_sock, audio):
            return
        # Audio goes out at once: its destination is fixed by the first accepted ping.
        audio.went_live()
        self._audio_sock.setblocking(False)
        addr = audio.addr
        # The ANNOUNCE's channel count (2, 6 or 8, checked there) and quality pick the Opus
        # config the DESCRIBE named (media.audio.layouts); a sink of another layout is
        # converted by the feed (media.audiofeed).
        layout = layouts.layout(params.audio_channels).config(bool(params.audio_high_quality))
        bitrate = layout.bitrate
        packetizer = AudioPacketizer(
            key=self.launch.rikey if params.audio_encrypted else None,
            rikeyid=self.launch.rikeyid,
            packet_ms=params.audio_packet_ms,
        )
        source = None
        if self.audio_source is not None:
            try:
                source = self.audio_source(params.audio_packet_ms, bitrate, layout)
            except Exception:  # no sound must not mean no stream
                log.exception("session audio failed to start; sending silence")
        if source is not None:
            self._send_captured(source, packetizer, audio)
            return
        try:
            silence = OpusSilence(params.audio_packet_ms, bitrate, layout=layout)
            opus = silence.next_packet()  # silence is constant: encode once
        except Exception:  # no libopus for this layout: the picture goes on without sound
            log.exception("no Opus encoder for %d-channel silence", layout.channels)
            return
        interval = params.audio_packet_ms / 1000
        next_at = time.monotonic()
        while not self._stop.is_set():
            self._drain(self._audio_sock, audio)  # logs a stranger's pings, moves nothing
            for packet in packetizer.packetize(opus):
                with contextlib.suppress(OSError):
                    self._audio_sock.sendto(packet, addr)
            self.stats.audio_packets += 1
            next_at += interval
            delay = next_at - time.monotonic()
            if delay > 0:
                time.sleep(delay)
            elif delay < -0.1:
                next_at = time.monotonic()

    def _send_captured(self, source, packetizer: AudioPacketizer, audio) -> None:
        """Captured sound: the capture paces this thread (see engine.audiofeed)."""
        addr = audio.addr
        while not self._stop.is_set():
            self._drain(self._audio_sock, audio)
            try:
                packets = source.next_packets()
            except Exception:
                log.exception("session audio failed; the stream goes on without sound")
                return
            for opus in packets:
                for packet in packetizer.packetize(opus):
                    with contextlib.suppress(OSError):
                        self._audio_sock.sendto(packet, addr)
                self.stats.audio_packets += 1


class _RtspConn:
    """One accepted RTSP connection, owned (and closed) by its handler thread."""

    __slots__ = ("conn", "evict", "ip", "thread")

    def __init__(self, conn: socket.socket, ip: str):
        self.conn = conn
        self.ip = ip
        self.evict = threading.Event()
        self.thread: threading.Thread | None = None


def _same_peer(a, b) -> bool:
    # pyenet may wrap one ENetPeer in several Python objects; its hash is the C pointer.
    return b is not None and (a is b or hash(a) == hash(b))
