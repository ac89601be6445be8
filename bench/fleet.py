"""Fleet event relay benchmark: time from a member's event to the fleet stream, and the fleet
host's CPU per member, idle and under load, at 1, 3 and 10 members.

Run by hand: `.venv/bin/python bench/fleet.py [--members 1,3,10] [--rate 10] [--seconds 10]
[--idle-s 20]`. Starts a real fleet host and one real member host (runhost: daphne over TLS,
Redis, Celery, their supervisors); every further member is a **stand-in**: a real TLS server
(tests/support/fakemember.py) speaking the member's SSE format and `/api/v1/health`, run in
this process, since ten real hosts do not fit on a 2-core machine. The output names which
members are real. Members are joined by writing the fleet host's member rows and token file
(as joining does). The real member's events come from `manage.py emit_event --stamp` (another
process, on the member's own bus); a stand-in's from a thread here. Latency: `sent_ns` in the
event to the frame read from `GET /api/v1/fleet/events` on the fleet host (one clock).
CPU: the fleet host's supervisor (where the relays run), its daphne (the fleet stream) and its
Redis (the buffer), from /proc, over each window.
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
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "hostmgmt.settings")

import httpx  # noqa: E402
import psutil  # noqa: E402

from fleet import pinned  # noqa: E402
from tests.support.fakemember import FakeMember  # noqa: E402
from tests.support.livehost import start_host  # noqa: E402

JOIN = """
import sys
import django
django.setup()
from fleet import member_tokens
from fleet.models import Member
for url, fingerprint, name, token in (line.split() for line in sys.stdin if line.strip()):
    row = Member.objects.create(url=url, fingerprint=fingerprint, name=name)
    member_tokens.put(row.id, token)
"""


def host_env(host) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith("HOST_")}
    env.pop("REDIS_URL", None)
    env.update(HOST_STATE_DIR=str(host.state_dir), DJANGO_SETTINGS_MODULE="hostmgmt.settings")
    return env


def join(fleet, members: list[tuple[str, str, str, str]]) -> None:
    lines = "".join(" ".join(m) + "\n" for m in members)
    subprocess.run(
        [sys.executable, "-c", JOIN], input=lines, text=True, cwd=ROOT, env=host_env(fleet),
        check=True, timeout=60,
    )  # fmt: skip


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
    parser.add_argument("--rate", type=float, default=10.0, help="events/s per member under load")
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--idle-s", type=float, default=20.0)
    args = parser.parse_args()
    counts = sorted(int(n) for n in args.members.split(","))

    tmp = Path(tempfile.mkdtemp(prefix="bench-fleet-"))
    fleet = start_host(state_dir=tmp / "fleet", wait=False)
    member = start_host(state_dir=tmp / "member", wait=False)
    fakes: list[FakeMember] = []
    try:
        fleet.wait_ready()
        member.wait_ready()
        procs = fleet_processes(fleet)
        reader = Reader(fleet)
        reader.start()
        time.sleep(3)
        baseline = sum(window(procs, args.idle_s).values())  # no members yet
        der = ssl.PEM_cert_to_DER_cert(member.cert_path.read_text())
        join(fleet, [(member.url, pinned.certificate_fingerprint(der), "real-1",
                      member.plugin_token)])  # fmt: skip
        print(f"fleet host: real ({fleet.url}); member 1: real host ({member.url}); "
              "members 2..N: stand-ins (TLS servers speaking the member's SSE format, in the "
              "bench process)")  # fmt: skip
        print(f"load: {args.rate:g} events/s per member for {args.seconds:g} s; idle window "
              f"{args.idle_s:g} s (members send their keep-alive every 15 s)\n")  # fmt: skip
        header = (f"{'members':>7} {'real':>4} {'p50 ms':>7} {'p99 ms':>7} {'events':>6} "
                  f"{'idle %core/member':>17} {'load %core':>10}  per process (load)")  # fmt: skip
        print(header)
        sys.stdout.flush()
        for n in counts:
            new = []
            while 1 + len(fakes) < n:
                fake = FakeMember(n=20 + len(fakes), keepalive_s=15.0)
                fakes.append(fake)
                new.append((fake.url, fake.fingerprint, f"stand-in-{len(fakes) + 1}", fake.token))
            if new:
                join(fleet, new)
            time.sleep(6)  # the relays start within the job's 2 s, then connect
            idle = window(procs, args.idle_s)
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

            def pump(fake, stop=stop):
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
            lat = reader.latencies
            idle_total = sum(idle.values()) - baseline
            parts = ", ".join(f"{k} {v:.1f}%" for k, v in load.items())
            print(f"{n:>7} {1:>4} {pct(lat, 0.5):>7.1f} {pct(lat, 0.99):>7.1f} {len(lat):>6} "
                  f"{idle_total / n:>17.2f} {sum(load.values()):>10.1f}  {parts}")  # fmt: skip
            sys.stdout.flush()
        print(f"\nidle: the fleet host's supervisor + daphne + Redis CPU over the idle window "
              f"less the same with no members ({baseline:.2f} % of a core: the host's own "
              "periodic jobs), divided by the members")  # fmt: skip
    finally:
        for fake in fakes:
            fake.close()
        member.stop()
        fleet.stop()


if __name__ == "__main__":
    main()
