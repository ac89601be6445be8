"""Run as a script: a paired moonlight-python client plays a session on the live host.

    play_client.py BASE_PORT CONFIG_DIR APP SECONDS {tone|input|vanish} MARKS MGMT_URL TOKEN CAFILE

* `tone`: streams `APP` (the tone app) with the library's audio capture on; after 1.5 s of
  sound it asks the app for the tone in `MARKS/tone-spec.json`, keeps streaming `SECONDS`,
  then quits and decodes the Opus packets the client library delivered with the library's
  own decoder. Writes `MARKS/received.npz` (PCM, the receive time of each packet's first
  sample); prints the stream's bitrate as the host reported it.
  With `PLAY_AUDIO_CHANNELS=6` (or 8) in its environment the client asks for 5.1 (7.1), and
  the surround packets are decoded with libopus's multistream decoder and the config the
  client library derived, as Moonlight's own clients decode (moonlight-python's FFmpeg
  decoder reorders surround to FFmpeg's channel order, and crashes on 8 channels); the
  result then carries that `opus_config`. `PLAY_BITRATE_KBPS=20000` makes the client ask for
  high-quality surround (moonlight-common-c does from 15 Mb/s).
* `input`: streams Desktop and drives its display through the control stream (keys, mouse
  absolute and relative, scroll, a flood, absurd coordinates, a key held at disconnect),
  reading each effect back from the X display (XQueryKeymap, the pointer, a tiny window
  that records the events it gets).
* `vanish`: streams `APP` for `SECONDS`, then exits without a goodbye.

One JSON line on stdout. A subprocess because moonlight-common-c keeps global state.
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

import httpx
import numpy as np

from media.audio.multistream import MultistreamDecoder

KEY_DOWN, KEY_UP = 0x03, 0x04
# moonlight-common-c's MAKE_AUDIO_CONFIGURATION(channels, mask) (Limelight.h)
AUDIO_CONFIGURATIONS = {
    2: (0x3 << 16) | (2 << 8) | 0xCA,
    6: (0x3F << 16) | (6 << 8) | 0xCA,
    8: (0x63F << 16) | (8 << 8) | 0xCA,
}
BUTTON_PRESS, BUTTON_RELEASE = 0x07, 0x08


def mcc():
    from moonlight_python.stream import _find_shared_lib

    lib = ctypes.CDLL(_find_shared_lib())  # the same loaded library the session uses
    lib.LiSendKeyboardEvent.argtypes = [ctypes.c_short, ctypes.c_char, ctypes.c_char]
    lib.LiSendMousePositionEvent.argtypes = [ctypes.c_short] * 4
    lib.LiSendMouseMoveEvent.argtypes = [ctypes.c_short] * 2
    lib.LiSendScrollEvent.argtypes = [ctypes.c_byte]
    lib.LiSendMouseButtonEvent.argtypes = [ctypes.c_char, ctypes.c_int]
    return lib


def wait_for(pred, timeout=3.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        v = pred()
        if v:
            return v
        time.sleep(0.005)
    return pred()


def status(mgmt) -> dict:
    url, token, cafile = mgmt
    r = httpx.get(f"{url}/api/v1/status", headers={"Authorization": f"Bearer {token}"},
                  verify=cafile, timeout=10)  # fmt: skip
    return r.json()


def drive_input(x_display: str, width: int, height: int) -> dict:
    """Every check reads the X server itself; returns what arrived and how fast."""
    from Xlib import XK, X
    from Xlib import display as xdisplay

    lib = mcc()
    d = xdisplay.Display(x_display)
    root = d.screen().root
    mask = X.KeyPressMask | X.KeyReleaseMask | X.ButtonPressMask
    win = root.create_window(0, 0, width, height, 0, d.screen().root_depth,
                             override_redirect=True, event_mask=mask)  # fmt: skip
    win.map()
    d.sync()
    kc_a = d.keysym_to_keycode(XK.string_to_keysym("a"))
    kc_b = d.keysym_to_keycode(XK.string_to_keysym("b"))

    def held(kc) -> bool:
        return bool(d.query_keymap()[kc // 8] >> (kc % 8) & 1)

    def pointer():
        p = root.query_pointer()
        return p.root_x, p.root_y

    def drain():
        got = []
        while d.pending_events():
            ev = d.next_event()
            got.append((ev.type, getattr(ev, "detail", None)))
        return got

    out: dict = {}
    lib.LiSendMousePositionEvent(width // 2, height // 2, width, height)
    out["abs_center"] = wait_for(lambda: pointer() == (width // 2, height // 2)) and pointer()
    t0 = time.monotonic()
    lib.LiSendKeyboardEvent(0x8041, KEY_DOWN, 0)  # 'A' as Moonlight sends it (0x80 | VK)
    out["a_held"] = bool(wait_for(lambda: held(kc_a)))
    out["key_ms"] = round((time.monotonic() - t0) * 1000, 1)
    lib.LiSendKeyboardEvent(0x8041, KEY_UP, 0)
    out["a_released"] = bool(wait_for(lambda: not held(kc_a)))
    # Absolute at another reference size is scaled; relative moves add up.
    lib.LiSendMousePositionEvent(100, 50, width // 2, height // 2)
    out["abs_scaled"] = wait_for(lambda: pointer() == (200, 100)) and pointer()
    lib.LiSendMouseMoveEvent(30, -20)
    out["rel"] = wait_for(lambda: pointer() == (230, 80)) and pointer()
    lib.LiSendScrollEvent(1)
    lib.LiSendMouseButtonEvent(BUTTON_PRESS, 1)
    lib.LiSendMouseButtonEvent(BUTTON_RELEASE, 1)
    time.sleep(0.3)
    events = drain()
    out["key_events"] = [e for e in events if e[0] in (X.KeyPress, X.KeyRelease)]
    out["kc_a"] = kc_a
    out["buttons"] = [e[1] for e in events if e[0] == X.ButtonPress]
    # Abuse: absurd coordinates are clamped; a flood neither crashes nor sticks anything.
    lib.LiSendMousePositionEvent(32000, -32000, 100, 100)
    out["abs_clamped"] = wait_for(lambda: pointer() == (width - 1, 0)) and pointer()
    t0 = time.monotonic()
    for i in range(10_000):
        lib.LiSendMouseMoveEvent(1 if i % 2 else -1, 0)
        lib.LiSendKeyboardEvent(0x8041, KEY_DOWN if i % 2 == 0 else KEY_UP, 0)
    out["flood_s"] = round(time.monotonic() - t0, 3)
    # The flood's last event is a release: A must come up once the host has worked through
    # the backlog (a loaded CI box took longer than the 0.5 s once waited here). Still held
    # after 3 s means a release was dropped.
    out["a_after_flood"] = not wait_for(lambda: not held(kc_a), timeout=3.0)
    # B, held when the client goes away. A press right behind the flood may still find the
    # host working through its backlog (A is up for every other event of it, so A's check can
    # pass mid-flood), where the limiter rightly drops presses over its rate: press again
    # until B is down (a press of a held key changes nothing).
    for _ in range(4):
        lib.LiSendKeyboardEvent(0x8042, KEY_DOWN, 0)
        if wait_for(lambda: held(kc_b), timeout=1.5):
            break
    out["b_held"] = bool(held(kc_b))
    out["_d"], out["_kc_b"] = d, kc_b
    return out


def main() -> None:
    from moonlight_python.audio_decoder import AudioDecoder
    from moonlight_python.config import StreamConfig
    from moonlight_python.http_client import NvHTTP
    from moonlight_python.identity import Identity
    from moonlight_python.stream import StreamingSession

    from tests.support.client import x_display_of_session

    base, config_dir, app_name = int(sys.argv[1]), sys.argv[2], sys.argv[3]
    seconds, action, marks = float(sys.argv[4]), sys.argv[5], Path(sys.argv[6])
    mgmt = sys.argv[7:10]
    width, height, fps = 640, 360, 30
    http = NvHTTP("127.0.0.1", Identity(config_dir), http_port=base, https_port=base - 5)
    app = next(a for a in http.get_app_list() if a.name == app_name)
    key, iv = secrets.token_bytes(16), secrets.token_bytes(16)
    session = StreamingSession()
    channels = int(os.environ.get("PLAY_AUDIO_CHANNELS", "2"))
    kbps = int(os.environ.get("PLAY_BITRATE_KBPS", "10000"))  # >= 15000: high-quality surround
    config = StreamConfig(width=width, height=height, fps=fps, bitrate_kbps=kbps,
                          audio_configuration=AUDIO_CONFIGURATIONS[channels])  # fmt: skip
    url = http.launch_app(app.id, width, height, fps, kbps, 1, key, iv,
                          config.surroundaudioinfo,
                          launch_query_params=session.get_launch_query_params())  # fmt: skip
    session.start(address="127.0.0.1", app_version="7.1.431.-1", gfe_version="3.23.0.74",
                  server_codec_mode_support=1, rtsp_session_url=url, config=config,
                  ri_aes_key=key, ri_aes_iv=iv, capture_audio=True)  # fmt: skip
    frames, packets = [0], []
    stop = threading.Event()

    def pull_video() -> None:
        while session.pull_frame() is not None:
            frames[0] += 1

    def pull_audio() -> None:
        while not stop.is_set():
            pkt = session.pull_audio_packet(timeout=0.1)
            if pkt is not None:
                packets.append(pkt)

    threading.Thread(target=pull_video, daemon=True).start()
    threading.Thread(target=pull_audio, daemon=True).start()
    result: dict = {"app_id": app.id}
    if action == "vanish":
        time.sleep(seconds)
        print(json.dumps({**result, "frames": frames[0]}), flush=True)
        os._exit(0)
    inp = None
    if action == "tone":
        time.sleep(1.5)
        (marks / "play").write_text((marks / "tone-spec.json").read_text())
        time.sleep(seconds)
        result["status"] = status(mgmt)
    else:
        inp = drive_input(x_display_of_session(*mgmt), width, height)
    session.stop()  # ENet disconnect: the host must let go of held keys
    if inp is not None:
        d, kc_b = inp.pop("_d"), inp.pop("_kc_b")
        inp["b_released_on_disconnect"] = bool(
            wait_for(lambda: not d.query_keymap()[kc_b // 8] >> (kc_b % 8) & 1)
        )
        d.close()
        result["input"] = inp
    stop.set()
    time.sleep(0.2)
    result["termination"] = session.termination_error if session.is_terminated else None
    http.quit_app()
    result["frames"] = frames[0]
    result["audio_packets"] = len(packets)
    result["audio_loss"] = session.audio_loss_stats
    if packets:
        cfg = session.wait_for_opus_config(0.1)
        if cfg.channel_count > 2:
            ms = MultistreamDecoder(cfg.channel_count, cfg.streams, cfg.coupled_streams,
                                    cfg.mapping)  # fmt: skip
            result["opus_config"] = [cfg.channel_count, cfg.streams, cfg.coupled_streams,
                                     list(cfg.mapping)]  # fmt: skip

            def decode(data: bytes) -> list:
                return [ms.decode(data).astype(np.float32) / 32768]
        else:
            dec = AudioDecoder(cfg.sample_rate, cfg.channel_count, cfg.streams,
                               cfg.coupled_streams, cfg.mapping)  # fmt: skip
            decode = dec.decode
        pcm, starts = [], []
        n = 0
        for pkt in packets:
            for block in decode(pkt.opus_data):
                starts.append((n, pkt.receive_time_us))
                pcm.append(block)
                n += block.shape[0]
        np.savez(marks / "received.npz", pcm=np.concatenate(pcm).astype(np.float32),
                 starts=np.array(starts, dtype=np.int64))  # fmt: skip
        result["samples_per_packet"] = cfg.samples_per_frame
    print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
