"""Run as a script: the real client streams from our StreamSession through a lossy UDP relay.

This kernel has no ``netem`` (and the tests may not use netns), so loss is made in user space:
the host's SETUP reply names the relay's port as the video port, the relay forwards the
client's pings to the host and the host's video datagrams back, dropping a seeded share of the
video. The host runs with adaptive bitrate on. Prints one JSON line: what the client received
and how the host's rate and FEC moved (sampled every 0.25 s).

Usage: lossy_client.py SECONDS DROP_PCT [SEED]
"""

from __future__ import annotations

import json
import random
import select
import socket
import sys
import threading
import time

from tests.compat.e2e_client import loopback_launch, pattern


class LossyRelay:
    """client <-> relay_port (here) <-> host video port; drops ``drop_pct`` % of the video."""

    def __init__(self, host_port: int, drop_pct: float, seed: int):
        self.front = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.front.bind(("127.0.0.1", 0))
        self.back = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.back.bind(("127.0.0.1", 0))
        self.port = self.front.getsockname()[1]
        self.host = ("127.0.0.1", host_port)
        self.rng = random.Random(seed)
        self.drop = drop_pct / 100
        self.client = None
        self.forwarded = self.dropped = 0
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while not self.stop.is_set():
            ready, _, _ = select.select([self.front, self.back], [], [], 0.05)
            for sock in ready:
                data, addr = sock.recvfrom(65535)
                if sock is self.front:  # the client's pings go on to the host
                    self.client = addr
                    self.back.sendto(data, self.host)
                elif self.client is not None:
                    if self.rng.random() < self.drop:
                        self.dropped += 1
                    else:
                        self.forwarded += 1
                        self.front.sendto(data, self.client)

    def close(self) -> None:
        self.stop.set()
        self.thread.join(2)
        self.front.close()
        self.back.close()


def main() -> None:
    from moonlight_python.config import StreamConfig
    from moonlight_python.stream import StreamingSession

    from compat.engine.session import StreamSession

    seconds, drop_pct = float(sys.argv[1]), float(sys.argv[2])
    seed = int(sys.argv[3]) if len(sys.argv) > 3 else 18
    launch, key, iv = loopback_launch(
        fec_percentage=20,
        adaptive_bitrate=True,
        adaptive_min_kbps=2000,
    )
    host = StreamSession(launch, pattern)
    relay = LossyRelay(launch.video_port, drop_pct, seed)
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
