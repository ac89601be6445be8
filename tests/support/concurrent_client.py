"""Run as a script: one paired moonlight-python client of the concurrent-session tests.

    concurrent_client.py BASE_PORT CONFIG_DIR APP OUT_DIR START_AT VK MAX_S {cancel|hold}

At wall-clock START_AT it launches APP at 1280x720@60, or at STREAM_MODE (`WxH`) from the
environment (several clients start together this way), streams video and audio, sends the
key VK (a Windows virtual-key code, as Moonlight does) three times from 2 s after it
connected, and streams until OUT_DIR/stop appears, the host ends the stream, or MAX_S pass.
Then `cancel` quits the app (/cancel); `hold` only stops streaming. It writes
OUT_DIR/connected once the stream runs, and prints one JSON line: the launch time and URL (or
the refusal), frame count, fps, the longest gap between two frames after the first second,
the centre and quarter-point colours and the size of the last picture (RGB), the loudest
frequency of the last second of sound, and how the stream ended.
"""

from __future__ import annotations

import ctypes
import json
import os
import secrets
import sys
import threading
import time
from pathlib import Path

import av
import numpy as np

KEY_DOWN, KEY_UP = 0x03, 0x04
W, H, FPS = 1280, 720, 60
if os.environ.get("STREAM_MODE"):
    W, H = (int(v) for v in os.environ["STREAM_MODE"].split("x"))


def main() -> None:
    from moonlight_python.audio_decoder import AudioDecoder
    from moonlight_python.config import StreamConfig
    from moonlight_python.http_client import NvHTTP
    from moonlight_python.identity import Identity
    from moonlight_python.stream import StreamingSession, _find_shared_lib

    base, config_dir, app_name, out = int(sys.argv[1]), sys.argv[2], sys.argv[3], Path(sys.argv[4])
    start_at, vk = float(sys.argv[5]), int(sys.argv[6], 0)
    max_s, action = float(sys.argv[7]), sys.argv[8]
    http = NvHTTP("127.0.0.1", Identity(config_dir), http_port=base, https_port=base - 5)
    app = next(a for a in http.get_app_list() if a.name == app_name)
    key, iv = secrets.token_bytes(16), secrets.token_bytes(16)
    session = StreamingSession()
    config = StreamConfig(width=W, height=H, fps=FPS, bitrate_kbps=6000)
    extra = session.get_launch_query_params()
    time.sleep(max(0.0, start_at - time.time()))
    result: dict = {"launch_at": time.time()}
    try:
        url = http.launch_app(app.id, W, H, FPS, 6000, 1, key, iv, config.surroundaudioinfo,
                              launch_query_params=extra)  # fmt: skip
    except Exception as exc:  # the refusal is the result
        print(json.dumps({**result, "launch_error": str(exc)}), flush=True)
        return
    result["session_url"] = url
    session.start(address="127.0.0.1", app_version="7.1.431.-1", gfe_version="3.23.0.74",
                  server_codec_mode_support=1, rtsp_session_url=url, config=config,
                  ri_aes_key=key, ri_aes_iv=iv, capture_audio=True)  # fmt: skip
    frames: list = []
    packets: list = []
    done = threading.Event()

    def pull_video() -> None:
        while (raw := session.pull_frame()) is not None:
            frames.append((time.monotonic(), raw))

    def pull_audio() -> None:
        while not done.is_set():
            pkt = session.pull_audio_packet(timeout=0.1)
            if pkt is not None:
                packets.append(pkt)

    threading.Thread(target=pull_video, daemon=True).start()
    threading.Thread(target=pull_audio, daemon=True).start()
    (out / "connected").write_text(url)
    lib = ctypes.CDLL(_find_shared_lib())
    lib.LiSendKeyboardEvent.argtypes = [ctypes.c_short, ctypes.c_char, ctypes.c_char]
    t0 = time.monotonic()
    keys_sent = 0
    while time.monotonic() - t0 < max_s and not (out / "stop").exists():
        if session.is_terminated:
            break
        if keys_sent < 3 and time.monotonic() - t0 > 2 + keys_sent * 0.3:
            lib.LiSendKeyboardEvent(0x8000 | vk, KEY_DOWN, 0)
            lib.LiSendKeyboardEvent(0x8000 | vk, KEY_UP, 0)
            keys_sent += 1
        time.sleep(0.05)
    result["terminated_by_host"] = bool(session.is_terminated)
    result["termination"] = session.termination_error if session.is_terminated else None
    session.stop()
    done.set()
    time.sleep(0.2)
    if action == "cancel":
        t1 = time.monotonic()
        try:
            http.quit_app()
        except Exception as exc:
            result["cancel_error"] = str(exc)
        result["cancel_s"] = round(time.monotonic() - t1, 3)
    frames = list(frames)
    result["frames"] = len(frames)
    result["keys_sent"] = keys_sent
    if len(frames) > 1:
        times = np.array([t for t, _ in frames])
        result["fps"] = round((len(times) - 1) / (times[-1] - times[0]), 1)
        steady = times[times > times[0] + 1.0]
        result["max_gap_s"] = round(float(np.diff(steady).max()), 3) if steady.size > 1 else None
    decoder = av.CodecContext.create("h264", "r")
    last = None
    for _, raw in frames:
        for pic in decoder.decode(av.Packet(raw.annex_b_data)):
            last = pic
    if last is not None:
        rgb = last.to_ndarray(format="rgb24")
        result["centre_rgb"] = rgb[H // 2, W // 2].tolist()
        result["shape"] = list(rgb.shape)
        result["quarter_rgb"] = rgb[H // 4, W // 4].tolist()  # off the centre's cursor
    if packets:
        cfg = session.wait_for_opus_config(0.1)
        dec = AudioDecoder(cfg.sample_rate, cfg.channel_count, cfg.streams,
                           cfg.coupled_streams, cfg.mapping)  # fmt: skip
        pcm = np.concatenate([b for p in packets for b in dec.decode(p.opus_data)])[:, 0]
        # The last 2 s, in 0.25 s windows (a dropped packet's gap blurs one window).
        rate = cfg.sample_rate
        tail = pcm[-2 * rate :].astype(np.float64)
        win = min(rate // 4, tail.size)
        chunks = [tail[i : i + win] for i in range(0, tail.size - win + 1, win)]
        spectra = np.array([np.abs(np.fft.rfft(c * np.hanning(win))) ** 2 for c in chunks])
        spectrum = spectra.sum(axis=0)
        freqs = np.fft.rfftfreq(win, 1 / rate)
        result["tone_hz"] = round(float(freqs[int(np.argmax(spectrum))]), 1)
        for f in (440, 1000):  # each app's tone: the share of the energy within 20 Hz of it
            band = np.abs(freqs - f) <= 20
            result[f"share_{f}"] = round(float(spectrum[band].sum() / spectrum.sum()), 4)
            # Per window, then the median: a few windows a late packet or a starved sink
            # smeared cannot pull it down (once 0.45 over all windows, in CI).
            shares = spectra[:, band].sum(axis=1) / spectra.sum(axis=1)
            result[f"median_share_{f}"] = round(float(np.median(shares)), 4)
        result["audio_rms"] = round(float(np.sqrt(np.mean(np.square(tail)))), 4)
    print(json.dumps(result), flush=True)
    os._exit(0)


if __name__ == "__main__":
    main()
