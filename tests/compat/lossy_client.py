"""Run as a script: the real client streams from our StreamSession through a lossy UDP relay.

This kernel has no ``netem`` (and the tests may not use netns), so loss is made in user space
(tests/support/netem_relay.py): the host's SETUP reply names the relay's port as the video
port, the relay forwards the client's pings to the host and the host's video datagrams back,
dropping a seeded share of the video. The host runs with adaptive bitrate on. Prints one JSON
line: what the client received and how the host's rate and FEC moved (sampled every 0.25 s).

Usage: lossy_client.py SECONDS DROP_PCT [SEED]
"""

from __future__ import annotations

import json
import sys
import threading
import time

from tests.compat.e2e_client import loopback_launch, pattern
from tests.support.netem_relay import Impairment, UdpRelay


def main() -> None:
    from moonlight_python.config import StreamConfig
    from moonlight_python.stream import StreamingSession

    from compat.engine.stream import StreamSession

    seconds, drop_pct = float(sys.argv[1]), float(sys.argv[2])
    seed = int(sys.argv[3]) if len(sys.argv) > 3 else 18
    launch, key, iv = loopback_launch(
        fec_percentage=20,
        adaptive_bitrate=True,
        adaptive_min_kbps=2000,
    )
    host = StreamSession(launch, pattern)
    relay = UdpRelay(("127.0.0.1", launch.video_port), Impairment(loss_pct=drop_pct, seed=seed))
    host.rtsp.video_port = relay.port  # the SETUP reply sends the client to the relay
    host.start()
    client = StreamingSession()
    client.start(
        address="127.0.0.1",
        app_version="7.1.431.-1",
        gfe_version="3.23.0.74",
        server_codec_mode_support=1,
        rtsp_session_url=f"rtsp://127.0.0.1:{launch.rtsp_port}",
        config=StreamConfig(width=640, height=360, fps=30, bitrate_kbps=8000),
        ri_aes_key=key,
        ri_aes_iv=iv,
        capture_audio=False,
    )
    frames: list = []

    def pull() -> None:
        while (raw := client.pull_frame()) is not None:
            frames.append((time.monotonic(), raw))

    puller = threading.Thread(target=pull, daemon=True)
    puller.start()
    t0 = time.monotonic()
    timeline = []
    while (now := time.monotonic()) - t0 < seconds:
        s = host.stats
        timeline.append([round(now - t0, 2), s.target_kbps, s.fec_pct, s.bytes_sent])
        time.sleep(0.25)
    host.stop("host")
    client.stop()
    client.wake()
    puller.join(2)
    relay.close()
    sent, lost, lost_frames = host.loss.snapshot()
    end = time.monotonic()
    print(json.dumps({
        "frames": len(frames),
        "frames_last_2s": len([at for at, _ in frames if at > end - 2.5]),
        "host_frames_sent": host.stats.frames_sent,
        "idr_frames": host.stats.idr_frames,
        "rate_changes": host.stats.rate_changes,
        "timeline": timeline,
        "relay_forwarded": relay.forwarded,
        "relay_dropped": relay.dropped,
        "reported_sent": sent,
        "reported_lost": lost,
        "lost_frames": lost_frames,
        "stop_reason": host.stop_reason,
    }))  # fmt: skip


if __name__ == "__main__":
    main()
