"""The compat stream over a lossy, jittery, reordering link: frozen picture, recovery and the
bitrate it costs, per loss level and per kind of client.

Run by hand: `.venv/bin/python bench/lossy.py [--seconds 8] [--levels 1,5,10] [--runs 4]
[--mode 640x360x30] [--jitter-ms 20] [--reorder-pct 5]`.

Each run is tests/compat/netem_client.py in its own process: our StreamSession (libx264, a
moving textured bar) and the real client (moonlight-common-c), the video through the seeded
user-space netem stand-in (tests/support/netem_relay.py; no netem or netns here). Three
clients: one that announces reference-frame invalidation (RFI), one that does not (strict IDR
mode, as moonlight-python), and that same one with the host sending every datagram in order
(no swapped pair: what the host did before, see compat.engine.recovery). Per level and client,
over `--runs` seeds:

* frozen picture: the longest wall-clock gap between two decoded frames in each run, p50 / p99
  / max over the runs, and the p99 of all gaps between decoded frames pooled;
* recovery after an invalidation request: request heard -> IDR sent (host), and -> the next
  key frame the client decoded, p50 / max;
* key frames sent, and the bitrate sent against the same client with no loss (same jitter).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

CLIENTS = {"rfi": ["--rfi"], "no RFI": [], "no RFI, in order": ["--no-reorder"]}


def run_one(args, client: str, loss: float, seed: int) -> dict:
    w, h, fps = args.mode.split("x")
    out = subprocess.run(
        [sys.executable, str(ROOT / "tests/compat/netem_client.py"), *CLIENTS[client],
         str(args.seconds), str(loss), str(args.jitter_ms), str(args.reorder_pct), str(seed),
         w, h, fps],
        capture_output=True, text=True, timeout=args.seconds + 120, cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )  # fmt: skip
    if out.returncode != 0:
        return {"loss_pct": loss, "error": out.stderr[-500:]}
    return json.loads(out.stdout.strip().splitlines()[-1])


def pct(values: list[float], q: float) -> float:
    """Nearest-rank percentile (the runs are few: p99 of four is their max)."""
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q / 100 * len(ordered) + 0.5) - 1))]


def summary(runs: list[dict], baseline_kbps: float | None) -> dict:
    ok = [r for r in runs if "error" not in r]
    freezes = [r["freeze_max_s"] for r in ok]
    gaps = [g for r in ok for g in r["frame_gaps_ms"]]
    answer = [v for r in ok for v in r["rfi_answer_ms"]]
    decoded = [v for r in ok for v in r["rfi_decoded_ms"]]
    kbps = statistics.mean(r["kbps_sent"] for r in ok) if ok else float("nan")
    return {
        "runs": len(ok), "failed": len(runs) - len(ok),
        "freeze_p50": pct(freezes, 50), "freeze_p99": pct(freezes, 99),
        "freeze_max": max(freezes, default=float("nan")),
        "over_1s": sum(f > 1.0 for f in freezes),
        "gap_p99_ms": pct(gaps, 99),
        "answer_p50_ms": pct(answer, 50), "answer_max_ms": max(answer, default=float("nan")),
        "decoded_p50_ms": pct(decoded, 50), "decoded_max_ms": max(decoded, default=float("nan")),
        "requests": len(answer),
        "idr_per_run": statistics.mean(r["idr_frames"] for r in ok) if ok else float("nan"),
        "kbps": kbps,
        "cost_pct": (kbps / baseline_kbps - 1) * 100 if baseline_kbps else float("nan"),
    }  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seconds", type=float, default=8)
    ap.add_argument("--levels", default="1,5,10")
    ap.add_argument("--runs", type=int, default=4)
    ap.add_argument("--mode", default="640x360x30")
    ap.add_argument("--jitter-ms", type=float, default=20)
    ap.add_argument("--reorder-pct", type=float, default=5)
    ap.add_argument("--seed", type=int, default=21)
    args = ap.parse_args()
    began = time.monotonic()
    seeds = [args.seed + i for i in range(args.runs)]
    table = []
    for client in CLIENTS:
        base = run_one(args, client, 0, args.seed)
        noisy = ("frame_gaps_ms", "fec_reports", "mcc_log")
        print(json.dumps({k: v for k, v in base.items() if k not in noisy}), flush=True)
        base_kbps = base.get("kbps_sent")
        for loss in (float(v) for v in args.levels.split(",")):
            runs = [run_one(args, client, loss, seed) for seed in seeds]
            for r in runs:
                slim = {
                    k: r.get(k)
                    for k in (
                        "loss_pct",
                        "rfi",
                        "reorder",
                        "freeze_max_s",
                        "idr_frames",
                        "rfi_verdicts",
                        "kbps_sent",
                        "error",
                    )
                }
                print(json.dumps(slim), flush=True)  # fmt: skip
            table.append((client, loss, summary(runs, base_kbps)))
    print(f"\n{args.mode}, {args.seconds:.0f} s per run, {args.runs} seeds per cell, jitter "
          f"{args.jitter_ms:.0f} ms, {args.reorder_pct:.0f} % held back, 20 % FEC (a launch's "
          f"default), libx264; {os.cpu_count()} CPUs, load {os.getloadavg()[0]:.1f}, "
          f"{time.monotonic() - began:.0f} s in all")  # fmt: skip
    print("| client | loss | longest freeze per run p50 / p99 / max s | runs > 1 s "
          "| frame gap p99 ms | request -> IDR sent p50 / max ms "
          "| request -> key frame decoded p50 / max ms | key frames per run "
          "| kbps sent (vs no loss) |")  # fmt: skip
    print("|---|---|---|---|---|---|---|---|---|")
    for client, loss, s in table:
        rec = (f"{s['answer_p50_ms']:.0f} / {s['answer_max_ms']:.0f} "
               f"| {s['decoded_p50_ms']:.0f} / {s['decoded_max_ms']:.0f}"
               if s["requests"] else "- | -")  # fmt: skip
        print(f"| {client} | {loss:g} % | {s['freeze_p50']:.2f} / {s['freeze_p99']:.2f} / "
              f"{s['freeze_max']:.2f} | {s['over_1s']} of {s['runs']} | {s['gap_p99_ms']:.0f} "
              f"| {rec} | {s['idr_per_run']:.1f} "
              f"| {s['kbps']:.0f} ({s['cost_pct']:+.1f} %) |")  # fmt: skip


if __name__ == "__main__":
    main()
