"""Library listing latency and full rescan wall time at scale, with a baseline from the same run.

Run by hand:  .venv/bin/python bench/library.py [--installed 5000] [--custom 500] [--rounds 20]

Builds fixture stores in a temp dir (Steam in two library folders, Heroic, Lutris; together
`--installed` titles), migrates a throwaway SQLite database, then measures:
- a full rescan from empty (what the worker does at first start), a no-change rescan, and one
  store-file poll (the stat pass the worker repeats every HOST_LIBRARY_POLL_S);
- `GET /api/v1/library` through Django and DRF in process (JSON rendering included) when the
  cached listing is current, right after a write (cache rebuilt: the worst case), the service
  call alone, a filtered listing, and as baseline a bare SQL read + JSON decode of the rows.
Events are recorded in memory (no Redis here).
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import statistics
import sys
import tempfile
import time
import types
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def build_stores(base: Path, installed: int) -> dict[str, str]:
    from tests.library import stores

    steam_n = installed * 7 // 10
    heroic_n = installed * 2 // 10
    lutris_n = installed - steam_n - heroic_n
    half = steam_n // 2
    stores.make_steam(
        base,
        {10_000 + i: f"Steam Game {i:05d}" for i in range(half)},
        {200_000 + i: f"steam game b {i:05d}" for i in range(steam_n - half)},
    )
    stores.make_heroic(base, {f"H{i:05d}": f"Heroic Game {i:05d}" for i in range(heroic_n - 1)})
    stores.make_lutris(base, [(i + 1, f"Lutris Game {i:05d}", 1) for i in range(lutris_n)])
    return stores.store_env(base)


def timed(fn, rounds: int) -> tuple[float, float]:
    samples = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - t0) * 1000)
    samples.sort()
    return statistics.median(samples), samples[max(0, int(len(samples) * 0.95) - 1)]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--installed", type=int, default=5000)
    ap.add_argument("--custom", type=int, default=500)
    ap.add_argument("--rounds", type=int, default=20)
    args = ap.parse_args()

    tmp = Path(tempfile.mkdtemp(prefix="bench-library-"))
    os.environ.update(
        {
            "HOST_STATE_DIR": str(tmp / "state"),
            "DJANGO_SETTINGS_MODULE": "hostmgmt.settings",
            "HOST_LOG_LEVEL": "WARNING",
            "HOST_NO_MGMT_TOKEN": "1",
        }
    )
    t0 = time.perf_counter()
    os.environ.update(build_stores(tmp / "stores", args.installed))
    print(f"fixture stores built in {time.perf_counter() - t0:.1f} s under {tmp}")

    import django

    django.setup()
    from django.core.management import call_command
    from django.test import Client

    call_command("migrate", verbosity=0)
    emitted: list = []
    fake = types.ModuleType("hooks.events")
    fake.emit = lambda kind, payload: emitted.append((kind, payload))
    sys.modules["hooks.events"] = fake

    from library import services
    from library.scanners import SCANNERS

    t0 = time.perf_counter()
    counts = services.rescan_all()
    full = time.perf_counter() - t0
    t0 = time.perf_counter()
    services.rescan_all()
    again = time.perf_counter() - t0
    poll_med, poll_p95 = timed(lambda: [s.signature() for s in SCANNERS.values()], 5)
    print(f"installed titles: {counts} (total {sum(counts.values())})")
    print(f"full rescan from empty:   {full * 1000:8.0f} ms")
    print(f"rescan, nothing changed:  {again * 1000:8.0f} ms")
    print(f"store-file poll (stat):   {poll_med:8.1f} ms median, {poll_p95:.1f} ms p95")

    for i in range(args.custom):
        services.create_custom({"title": f"Custom {i:04d}", "platform": "SNES" if i % 2 else "PC"})
    print(f"custom entries: {args.custom}; library.changed events: {len(emitted)}")

    client = Client()
    n = len(json.loads(client.get("/api/v1/library").content))
    http_med, http_p95 = timed(lambda: client.get("/api/v1/library"), args.rounds)
    svc_med, svc_p95 = timed(services.list_library, args.rounds)
    flt_med, flt_p95 = timed(lambda: client.get("/api/v1/library?platform=snes"), args.rounds)
    victim = services.create_custom({"title": "Victim"})["id"]
    counter = iter(range(10**6))

    def cold():
        services.update_custom(victim, {"title": f"Victim {next(counter)}"})
        client.get("/api/v1/library")

    cold_med, cold_p95 = timed(cold, args.rounds)

    db = sqlite3.connect(tmp / "state" / "db.sqlite3")

    def baseline():
        rows = db.execute(
            "SELECT entry FROM library_installedtitle ORDER BY title_key, id"
        ).fetchall()
        rows += db.execute("SELECT data FROM library_customentry ORDER BY title_key").fetchall()
        return [json.loads(r[0]) for r in rows]

    base_med, base_p95 = timed(baseline, args.rounds)
    print(f"GET /api/v1/library ({n} entries):  {http_med:7.1f} ms median, {http_p95:.1f} ms p95")
    print(f"GET right after a write (uncached):{cold_med:7.1f} ms median, {cold_p95:.1f} ms p95")
    print(f"list_library() service call:       {svc_med:7.1f} ms median, {svc_p95:.1f} ms p95")
    print(f"GET ?platform=snes (filtered):     {flt_med:7.1f} ms median, {flt_p95:.1f} ms p95")
    print(f"baseline: bare SQL read + json:    {base_med:7.1f} ms median, {base_p95:.1f} ms p95")
    print(f"uncached listing / baseline ratio: {cold_med / base_med:.2f}x")


if __name__ == "__main__":
    main()
