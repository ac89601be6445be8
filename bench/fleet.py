"""Fleet benchmark: the event relay (time from a member's event to the fleet stream, the fleet
host's CPU per member, idle and under load) and the refresh (round time, the members listing's
load time, CPU per idle member with the refresh running) at 1, 3 and 10 members.

Run by hand: `.venv/bin/python bench/fleet.py [--members 1,3,10] [--rate 10] [--seconds 10]
[--idle-s 30] [--page-s 25] [--refresh-s 10]`. Starts a real fleet host and one real member
host (runhost: daphne over TLS, Redis, Celery, their supervisors); every further member is a
**stand-in**: a real TLS server (tests/support/fakemember.py) speaking the member's SSE format
and answering what the join and the refresh ask, run in this process, since ten real hosts do
not fit on a 2-core machine. The output names which members are real. Every member is joined
through the fleet host's `POST /api/v1/fleet/members` (pinned whoami, role `fleet`); the real
member with a fleet token it minted (`manage.py mint_fleet_token`).

Relay: the real member's events come from `manage.py emit_event --stamp` (another process, on
the member's own bus); a stand-in's from a thread here. Latency: `sent_ns` in the event to the
frame read from `GET /api/v1/fleet/events` on the fleet host (one clock). `--rate 0` skips the
load window.

Refresh: the fleet host runs with `HOST_FLEET_REFRESH_S=--refresh-s`. Over the page window the
bench reads `GET /api/v1/fleet/members` (what the console's Fleet page loads every 10 s) every
0.25 s: its load time (p50/p99), and per member the `refreshed_at` values seen and their
`refresh_ms`. A round's time is from the first member's start (`refreshed_at - refresh_ms`) to
the last member's end; the spacing is between one member's consecutive `refreshed_at`.

CPU: the fleet host's supervisor (where the relays and the refresh run), its daphne (the fleet
stream, the listing) and its Redis (the buffer), from /proc, over each window. Idle per member:
the idle window (relays connected, the refresh running, no events) less the same window with
no members, divided by the members.
"""

from __future__ import annotations

import argparse
import json
import os
import ssl
import subprocess
import sys
import tempfile
import threading
import time
from datetime import datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "hostmgmt.settings")

import httpx  # noqa: E402
import psutil  # noqa: E402

from fleet import pinned  # noqa: E402
from tests.support.fakemember import FakeMember  # noqa: E402
from tests.support.livehost import start_host  # noqa: E402


def host_env(host) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith("HOST_")}
    env.pop("REDIS_URL", None)
    env.update(HOST_STATE_DIR=str(host.state_dir), DJANGO_SETTINGS_MODULE="hostmgmt.settings")
    return env


def join(fleet, members: list[tuple[str, str, str]]) -> None:
    """Each `(url, fingerprint, token)` through the fleet host's join route."""
    with fleet.mgmt() as c:
        for url, fingerprint, token in members:
            r = c.post("/api/v1/fleet/members",
                       json={"url": url, "token": token, "fingerprint": fingerprint})  # fmt: skip
            if r.status_code != 201:
                raise SystemExit(f"join of {url} answered {r.status_code}: {r.text[:300]}")


def mint_fleet_token(member) -> str:
    out = subprocess.run(
        [sys.executable, "manage.py", "mint_fleet_token", "bench-fleet"], cwd=ROOT,
        env=host_env(member), capture_output=True, text=True, check=True, timeout=120,
    )  # fmt: skip
    return out.stdout.strip()


def listing_window(fleet, seconds: float) -> tuple[list[float], dict[int, dict[str, float]]]:
    """Read the members listing every 0.25 s for `seconds`: its load times (ms) and, per
    member, `{refreshed_at (epoch s): refresh_ms}` seen."""
    loads: list[float] = []
    seen: dict[int, dict[str, float]] = {}
    end = time.monotonic() + seconds
    with fleet.mgmt() as c:
        while time.monotonic() < end:
            t0 = time.perf_counter()
            r = c.get("/api/v1/fleet/members")
            loads.append((time.perf_counter() - t0) * 1000)
            r.raise_for_status()
            for m in r.json():
                if m["refreshed_at"] and m["refresh_ms"] is not None and m["reachable"]:
                    at = datetime.fromisoformat(m["refreshed_at"]).timestamp()
                    seen.setdefault(m["id"], {})[at] = m["refresh_ms"]
            time.sleep(0.25)
    return loads, seen


def rounds(seen: dict[int, dict[float, float]], interval: float) -> tuple[list, list, list]:
    """Per-member refresh_ms, round times (ms) and per-member spacings (s) from what the
    listing showed. A round: the members' refreshes that ended within half an interval of the
    round's first end."""
    refresh_ms = [ms for per in seen.values() for ms in per.values()]
    spacing = []
    for per in seen.values():
        ats = sorted(per)
        spacing += [b - a for a, b in zip(ats, ats[1:], strict=False)]
    ends = sorted((at, ms) for per in seen.values() for at, ms in per.items())
    times, group = [], []
    for at, ms in [*ends, (float("inf"), 0.0)]:
        if group and at - group[0][0] > interval / 2:
            if len(group) == len(seen):  # a round every member's refresh of was seen
                start = min(a - m / 1000 for a, m in group)
                times.append((max(a for a, _ in group) - start) * 1000)
            group = []
        group.append((at, ms))
    return refresh_ms, times, spacing


class Reader(threading.Thread):
    """The fleet stream, read here: the latency of every stamped event."""

    def __init__(self, fleet):
        super().__init__(daemon=True)
        self.fleet = fleet
        self.latencies: list[float] = []
        self.recording = False
        self.frames = 0

    def run(self):
        try:
            self._read()
        except httpx.HTTPError:  # the fleet host stopped at the end of the run
            pass

    def _read(self):
        headers = {"Authorization": f"Bearer {self.fleet.mgmt_token}"}
        with (
            httpx.Client(
                base_url=self.fleet.url,
                verify=self.fleet.ssl_context(),
                timeout=httpx.Timeout(30, read=None),
            ) as c,  # fmt: skip
            c.stream("GET", "/api/v1/fleet/events", headers=headers) as r,
        ):
            for line in r.iter_lines():
                if not line.startswith("data: "):
                    continue
                now = time.time_ns()
                self.frames += 1
                sent = json.loads(line[6:]).get("sent_ns")
                if sent and self.recording:
                    self.latencies.append((now - sent) / 1e6)


def cpu_of(procs: dict[str, psutil.Process]) -> dict[str, float]:
    out = {}
    for name, p in procs.items():
        try:
            t = p.cpu_times()
            out[name] = t.user + t.system
        except psutil.Error:
            out[name] = 0.0
    return out


def fleet_processes(fleet) -> dict[str, psutil.Process]:
    sup = psutil.Process(fleet.proc.pid)
    procs = {"supervisor (relays)": sup}
    for child in sup.children(recursive=True):
        cmd = " ".join(child.cmdline())
        if "daphne" in cmd and "daphne" not in procs:
            procs["daphne (fleet stream)"] = child
        elif "redis-server" in cmd:
            procs["redis (buffer)"] = child
    return procs


def window(procs, seconds: float) -> dict[str, float]:
    before, t0 = cpu_of(procs), time.monotonic()
    time.sleep(seconds)
    after, elapsed = cpu_of(procs), time.monotonic() - t0
    return {k: (after[k] - before[k]) / elapsed * 100 for k in procs}


def pct(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--members", default="1,3,10")
    parser.add_argument("--rate", type=float, default=10.0,
                        help="events/s per member under load (0: no load window)")  # fmt: skip
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--idle-s", type=float, default=30.0)
    parser.add_argument("--page-s", type=float, default=25.0)
    parser.add_argument("--refresh-s", type=float, default=10.0,
                        help="the fleet host's HOST_FLEET_REFRESH_S")  # fmt: skip
    args = parser.parse_args()
    counts = sorted(int(n) for n in args.members.split(","))

    tmp = Path(tempfile.mkdtemp(prefix="bench-fleet-"))
    fleet = start_host(state_dir=tmp / "fleet", wait=False,
                       env={"HOST_FLEET_REFRESH_S": f"{args.refresh_s:g}"})  # fmt: skip
    member = start_host(state_dir=tmp / "member", wait=False)
    fakes: list[FakeMember] = []
    refresh_rows = []
    try:
        fleet.wait_ready()
        member.wait_ready()
        procs = fleet_processes(fleet)
        reader = Reader(fleet)
        reader.start()
        time.sleep(3)
        baseline = sum(window(procs, args.idle_s).values())  # no members yet
        der = ssl.PEM_cert_to_DER_cert(member.cert_path.read_text())
        join(fleet, [(member.url, pinned.certificate_fingerprint(der), mint_fleet_token(member))])
        print(f"fleet host: real ({fleet.url}), refresh every {args.refresh_s:g} s; member 1: "
              f"real host ({member.url}); members 2..N: stand-ins (TLS servers speaking the "
              "member's SSE format and refresh answers, in the bench process)")  # fmt: skip
        print(f"load: {args.rate:g} events/s per member for {args.seconds:g} s; idle window "
              f"{args.idle_s:g} s (members send their keep-alive every 15 s); listing read "
              f"every 0.25 s for {args.page_s:g} s\n")  # fmt: skip
        header = (f"{'members':>7} {'real':>4} {'p50 ms':>7} {'p99 ms':>7} {'events':>6} "
                  f"{'idle %core/member':>17} {'load %core':>10}  per process (load)")  # fmt: skip
        print(header)
        sys.stdout.flush()
        for n in counts:
            new = []
            while 1 + len(fakes) < n:
                fake = FakeMember(n=20 + len(fakes), keepalive_s=15.0, refresh=True)
                fakes.append(fake)
                new.append((fake.url, fake.fingerprint, fake.token))
            if new:
                join(fleet, new)
            time.sleep(6)  # the relays start within the job's 2 s, then connect
            idle = window(procs, args.idle_s)
            idle_total = sum(idle.values()) - baseline
            loads, seen = listing_window(fleet, args.page_s)
            refresh_ms, round_ms, spacing = rounds(seen, args.refresh_s)
            refresh_rows.append((n, idle_total / n, loads, refresh_ms, round_ms, spacing))
            lat, load = [], {}
            if args.rate > 0:
                lat, load = relay_load(fleet, member, fakes, procs, reader, args)
            parts = ", ".join(f"{k} {v:.1f}%" for k, v in load.items())
            print(f"{n:>7} {1:>4} {pct(lat, 0.5):>7.1f} {pct(lat, 0.99):>7.1f} {len(lat):>6} "
                  f"{idle_total / n:>17.2f} {sum(load.values()):>10.1f}  {parts}")  # fmt: skip
            sys.stdout.flush()
        print(f"\nidle: the fleet host's supervisor + daphne + Redis CPU over the idle window "
              f"less the same with no members ({baseline:.2f} % of a core: the host's own "
              "periodic jobs), divided by the members")  # fmt: skip
        print(f"\nrefresh every {args.refresh_s:g} s:")
        print(f"{'members':>7} {'refresh_ms p50':>14} {'max':>6} {'round ms p50':>12} "
              f"{'max':>6} {'rounds':>6} {'spacing s p50':>13} {'listing p50 ms':>14} "
              f"{'p99':>6} {'reads':>5} {'idle %core/member':>17}")  # fmt: skip
        for n, per_member, loads, refresh_ms, round_ms, spacing in refresh_rows:
            print(f"{n:>7} {pct(refresh_ms, 0.5):>14.1f} {max(refresh_ms, default=0):>6.1f} "
                  f"{pct(round_ms, 0.5):>12.1f} {max(round_ms, default=0):>6.1f} "
                  f"{len(round_ms):>6} {pct(spacing, 0.5):>13.2f} {pct(loads, 0.5):>14.1f} "
                  f"{pct(loads, 0.99):>6.1f} {len(loads):>5} {per_member:>17.2f}")  # fmt: skip
    finally:
        for fake in fakes:
            fake.close()
        member.stop()
        fleet.stop()


def relay_load(fleet, member, fakes, procs, reader, args) -> tuple[list[float], dict]:
    """Every member emitting `--rate` events/s for `--seconds`: the latencies and the CPU."""
    reader.latencies.clear()
    reader.recording = True
    count = int(args.rate * args.seconds)
    emitter = subprocess.Popen(
        [sys.executable, "manage.py", "emit_event", "game.running", "{}", "--stamp",
         "--count", str(count), "--interval-ms", str(1000 / args.rate)],
        cwd=ROOT, env=host_env(member), stdout=subprocess.DEVNULL,
    )  # fmt: skip
    time.sleep(2.5)  # the emitter's Django start; the load window starts with it
    stop = threading.Event()

    def pump(fake):
        while not stop.wait(1 / args.rate):
            fake.emit("game.running", {"sent_ns": time.time_ns()})

    pumps = [threading.Thread(target=pump, args=(f,), daemon=True) for f in fakes]
    for t in pumps:
        t.start()
    load = window(procs, args.seconds)
    stop.set()
    emitter.wait(60)
    time.sleep(1.0)
    reader.recording = False
    return list(reader.latencies), load


if __name__ == "__main__":
    main()
