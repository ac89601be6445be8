"""Run as a script: the real client streams from our StreamSession over an impaired link.

The video goes through tests/support/netem_relay.py (loss, 20 ms jitter, reordering, seeded):
the SETUP reply names the relay's port, the relay passes the client's pings and reports on to
the host and the host's datagrams back through the impairment. What the test reads:

* `decoded` and `freeze_max_s`: every frame the client hands over is decoded (libavcodec), and
  the longest wall-clock gap between two decoded frames (the start of the window and its end
  count as frames), i.e. the longest the picture would stand still;
* `fec_recovered`: frames delivered whole although the relay dropped one of their datagrams
  (the client rebuilt them from the FEC shards; the frame index is in each datagram's header);
* `idr_frames` / `lost_frames`: frames the FEC could not rebuild, which the client reported
  (IDR request or reference-frame invalidation) and the host answered with a key frame;
* with `--rfi` the client's decoder declares reference-frame invalidation (moonlight-python
  declares none), so the client asks with 0x0301 the moment it loses a frame: `rfi_verdicts`
  (the host's judgement of each request), `rfi_answer_ms` (request heard -> IDR sent) and
  `rfi_decoded_ms` (request heard -> the next key frame the client decoded);
* `--no-reorder`: the host sends every datagram in order (no swapped pair, see
  compat.engine.recovery), to measure what the swap is for;
* `frame_gaps_ms`: each wall-clock gap between two decoded frames after the warm-up.

Usage: netem_client.py [--rfi] [--no-reorder] SECONDS LOSS_PCT
       [JITTER_MS REORDER_PCT SEED WIDTH HEIGHT FPS]
Prints one JSON line.
"""

from __future__ import annotations

import json
import os
import struct
import sys
import threading
import time

from tests.compat.e2e_client import loopback_launch, pattern
from tests.support.netem_relay import Impairment, UdpRelay

WARM_S = 1.0  # the first IDR and the decoder's start are not a freeze
# moonlight-common-c's Limelight.h: the decoder can take reference-frame invalidation.
RFI_CAPABILITIES = 0x02 | 0x04 | 0x40  # AVC, HEVC, AV1


def announcing_rfi(session_class: type) -> type:
    """`session_class` whose video callbacks declare RFI for every codec (a test double of a
    decoder that has it: the pull renderer hands over whatever the client submits)."""

    class RfiSession(session_class):
        def _make_video_callbacks(self):
            dr = super()._make_video_callbacks()
            dr.capabilities |= RFI_CAPABILITIES
            return dr

    return RfiSession


def frame_index(head: bytes) -> int | None:
    """The frame a video datagram belongs to (RTP 12 + extension 4 + packet index 4 bytes)."""
    return struct.unpack("<I", head[20:24])[0] if len(head) >= 24 else None


def longest_freeze(times: list[float], start: float, end: float) -> tuple[float, float]:
    """(longest gap, when it began, seconds after `start`)."""
    marks = [start, *[t for t in times if start <= t <= end], end]
    gap, at = max((b - a, a) for a, b in zip(marks, marks[1:], strict=False))
    return gap, at - start


def main() -> None:
    import av
    from moonlight_python.config import StreamConfig
    from moonlight_python.stream import StreamingSession

    from compat.engine.stream import StreamSession

    flags = {a for a in sys.argv[1:] if a.startswith("--")}
    argv = [a for a in sys.argv[1:] if not a.startswith("--")]
    rfi, in_order = "--rfi" in flags, "--no-reorder" in flags
    seconds, loss = float(argv[0]), float(argv[1])
    rest = [float(v) for v in argv[2:]]
    jitter, reorder, seed, w, h, fps = rest + [20, 5, 21, 640, 360, 30][len(rest) :]
    w, h, fps, seed = int(w), int(h), int(fps), int(seed)
    launch, key, iv = loopback_launch()  # a real launch's defaults: 20 % FEC, fixed rate
    host = StreamSession(launch, pattern)
    imp = Impairment(loss_pct=loss, jitter_ms=jitter, reorder_pct=reorder, seed=seed)
    relay = UdpRelay(("127.0.0.1", launch.video_port), imp)
    host.rtsp.video_port = relay.port  # the SETUP reply sends the client to the relay
    asked: list[float] = []  # when the host heard the client report a lost frame
    frame_lost = host.loss.frame_lost
    host.loss.frame_lost = lambda: (asked.append(time.monotonic()), frame_lost())[1]
    rfi_heard: list[tuple[float, str]] = []  # (when, verdict) of each invalidation request
    judge = host.recovery.request

    def request(first: int, last: int, now: float) -> str:
        verdict = judge(first, last, now)
        rfi_heard.append((now, verdict))
        return verdict

    host.recovery.request = request
    if in_order:
        host.recovery.reorder = lambda rows, data_shards, now: rows
    fec_reports: list[tuple[float, object]] = []  # the client's 0x5502 per-frame FEC status
    fec_status = host.loss.fec_status
    host.loss.fec_status = lambda st: (fec_reports.append((time.monotonic(), st)), fec_status(st))[
        1
    ]
    host.start()
    if os.environ.get("NETEM_MCC_LOG"):  # the client library's own lines, to read a freeze
        from tests.support.mcc_log import LoggingSession

        client = (announcing_rfi(LoggingSession) if rfi else LoggingSession)()
    else:
        client = (announcing_rfi(StreamingSession) if rfi else StreamingSession)()
    client.start(
        address="127.0.0.1",
        app_version="7.1.431.-1",
        gfe_version="3.23.0.74",
        server_codec_mode_support=1,
        rtsp_session_url=f"rtsp://127.0.0.1:{launch.rtsp_port}",
        config=StreamConfig(width=w, height=h, fps=fps, bitrate_kbps=6000),
        ri_aes_key=key,
        ri_aes_iv=iv,
        capture_audio=False,
    )
    frames: list = []

    def pull() -> None:
        while (raw := client.pull_frame()) is not None:
            frames.append((time.monotonic(), raw.frame_number, raw.frame_type, raw.annex_b_data))

    puller = threading.Thread(target=pull, daemon=True)
    puller.start()
    t0 = time.monotonic()
    time.sleep(seconds)
    end = time.monotonic()
    host.stop("host")
    client.stop()
    client.wake()
    puller.join(2)
    relay.close()
    decoder = av.CodecContext.create("h264", "r")
    decoded_at, numbers, keys_at = [], [], []
    for at, number, kind, data in frames:
        try:
            if decoder.decode(av.Packet(data)):
                decoded_at.append(at)
                numbers.append(number)
                if kind == 1:
                    keys_at.append(at)
        except av.AVError:
            pass
    hit = {i for i in map(frame_index, relay.dropped_heads) if i is not None}
    delivered = {n for _, n, _, _ in frames}
    start = (decoded_at[0] if decoded_at else t0) + WARM_S
    _, _, lost_frames = host.loss.snapshot()
    freeze, freeze_at = longest_freeze(decoded_at, start, end)
    after = next((i for i, t in enumerate(decoded_at) if t > start + freeze_at), None)
    answered = [t for t, verdict in rfi_heard if verdict == "idr"]
    # request heard -> the next key frame the client decoded (each request answered with one)
    next_key = [next((k for k in keys_at if k > t), None) for t in answered]
    decoded_ms = [
        round((k - t) * 1000, 1) for t, k in zip(answered, next_key, strict=True) if k is not None
    ]
    recovery = host.stats.recovery
    after_warm = [t for t in decoded_at if t >= start]
    gaps_ms = [round((b - a) * 1000, 1) for a, b in zip(after_warm, after_warm[1:], strict=False)]
    print(json.dumps({
        "loss_pct": loss, "jitter_ms": jitter, "reorder_pct": reorder,
        "seconds": seconds, "mode": f"{w}x{h}x{fps}",
        "host_frames_sent": host.stats.frames_sent,
        "frames": len(frames),
        "decoded": len(decoded_at),
        "fps": round(len([t for t in decoded_at if t >= start]) / max(end - start, 0.1), 1),
        "freeze_max_s": round(freeze, 3),
        "freeze_at_s": round(freeze_at, 2),
        # The frames either side of the longest freeze (a gap in numbers: frames lost).
        "freeze_frames": numbers[max(0, (after or 1) - 1) : (after or 0) + 1],
        "idr_times_s": [round(t - start, 2) for t, _, k, _ in frames if k == 1],
        "loss_reports_s": [round(t - start, 2) for t in asked],
        "frames_hit": len(hit),
        "fec_recovered": len(hit & delivered),
        "frames_unrecovered": len(hit - delivered),
        "idr_frames": host.stats.idr_frames,
        "lost_frames": lost_frames,
        "relay_forwarded": relay.forwarded,
        "relay_dropped": relay.dropped,
        "relay_reordered": relay.reordered,
        "frames_last_2s": len([t for t in decoded_at if t > end - 2]),
        "stop_reason": host.stop_reason,
        "rfi": rfi,
        "reorder": not in_order and host.recovery.swap,  # off for an RFI client (its ANNOUNCE)
        "frame_gaps_ms": gaps_ms,
        "rfi_verdicts": recovery.verdicts,
        "rfi_answer_ms": [round(v, 1) for v in recovery.answer_ms.values()],
        "rfi_decoded_ms": decoded_ms,
        "bytes_sent": host.stats.bytes_sent,
        "kbps_sent": round(host.stats.bytes_sent * 8 / 1000 / max(end - t0, 0.1)),
        # (s, frame, missing before highest, data, parity, data received, parity received)
        "fec_reports": [
            (round(t - start, 2), st.frame_index, st.missing_before_highest, st.total_data,
             st.total_parity, st.received_data, st.received_parity)
            for t, st in fec_reports
        ],
        "mcc_log": [(round(t - start, 2), m) for t, m in getattr(client, "log", [])],
    }))  # fmt: skip


if __name__ == "__main__":
    main()
