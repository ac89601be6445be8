"""The compat stream over a lossy, jittery, reordering link: fps, freezes and FEC recoveries
per loss level.

Run by hand: `.venv/bin/python bench/lossy.py [--seconds 15] [--levels 0,1,5,10]
[--mode 640x360x30] [--jitter-ms 20] [--reorder-pct 5]`.

Each level runs tests/compat/netem_client.py in its own process: our StreamSession (libx264, a
moving textured bar) and the real client (moonlight-common-c), the video through the seeded
user-space netem stand-in (tests/support/netem_relay.py; no netem or netns here). Level 0 with
the same jitter is the baseline of the same run. Per level: decoded fps, the longest freeze
(wall-clock gap between two decoded frames), frames that lost a datagram and were rebuilt from
the FEC shards, frames FEC could not rebuild, and the key frames the host sent to recover.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def run_level(args, loss: float, seed: int) -> dict:
    w, h, fps = args.mode.split("x")
    out = subprocess.run(
        [sys.executable, str(ROOT / "tests/compat/netem_client.py"), str(args.seconds), str(loss),
         str(args.jitter_ms), str(args.reorder_pct), str(seed), w, h, fps],
        capture_output=True, text=True, timeout=args.seconds + 120, cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )  # fmt: skip
    if out.returncode != 0:
        return {"loss_pct": loss, "error": out.stderr[-500:]}
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seconds", type=float, default=15)
    ap.add_argument("--levels", default="0,1,5,10")
    ap.add_argument("--mode", default="640x360x30")
    ap.add_argument("--jitter-ms", type=float, default=20)
    ap.add_argument("--reorder-pct", type=float, default=5)
    ap.add_argument("--seed", type=int, default=21)
    args = ap.parse_args()
    rows = []
    for loss in (float(v) for v in args.levels.split(",")):
        r = run_level(args, loss, args.seed)
        print(json.dumps(r), flush=True)
        rows.append(r)
    print(f"\n{args.mode}, {args.seconds:.0f} s per level, jitter {args.jitter_ms:.0f} ms, "
          f"{args.reorder_pct:.0f} % held back, 20 % FEC (a launch's default), libx264; "
          f"{os.cpu_count()} CPUs, load {os.getloadavg()[0]:.1f}")  # fmt: skip
    print("| loss | fps decoded | longest freeze s | frames hit | FEC rebuilt | not rebuilt "
          "| key frames | datagrams dropped / reordered |")  # fmt: skip
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        if "error" in r:
            print(f"| {r['loss_pct']:g} % | client failed | | | | | | |")
            continue
        print(f"| {r['loss_pct']:g} % | {r['fps']} | {r['freeze_max_s']} | {r['frames_hit']} "
              f"| {r['fec_recovered']} | {r['frames_unrecovered']} | {r['idr_frames']} "
              f"| {r['relay_dropped']} / {r['relay_reordered']} |")  # fmt: skip


if __name__ == "__main__":
    main()
