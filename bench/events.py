"""Event bus benchmark: emit-to-SSE-receive latency, sustained delivery rate, hook start latency.

Run by hand: `.venv/bin/python bench/events.py [--events 200] [--subscribers 1,10,100,500]
[--processes N]` (N web processes; default the host's own default, the number of cores up to 4).
Starts its own host (runhost: daphne over TLS, Redis, Celery), emits from a separate process
(as a Celery worker would), reads the streams from client processes (100 streams each at
most, none in the host), and prints the figures next to two floors measured in the same run:
a bare Redis publish→subscribe round trip on the host's own Redis socket, and a bare ASGI app
(bench/asgi_sse_floor.py, no Django) that fans the same frames from the same Redis channel out
over the same daphne and TLS to the same client processes; the host's p50/p99 are printed as
ratios to that app's.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import psutil  # noqa: E402
import redis  # noqa: E402

from bench import bare_daphne  # noqa: E402
from supervisor import web_listener  # noqa: E402
from tests.support.livehost import start_host  # noqa: E402

EMITTER = """
import json, sys, time
import django
django.setup()
from hooks import events
for line in sys.stdin:
    kind, count, interval_ms = json.loads(line)
    for _ in range(count):
        events.emit(kind, {"source": str(time.time_ns())} if kind == "library.changed"
                    else {"id": str(time.time_ns())})
        if interval_ms:
            time.sleep(interval_ms / 1000)
    print("ok", flush=True)
"""


def per_frame(cpu: tuple[tuple[float, float], float], frames: int) -> str:
    """The host's cost of a frame (daphne: the hub, the stream, TLS) beside the clients'."""
    (user, system), clients = cpu
    user, system, clients = (c / max(frames, 1) * 1e6 for c in (user, system, clients))
    return (
        f"daphne {user + system:6.1f} us (user {user:.1f}, system {system:.1f}), "
        f"the client processes {clients:6.1f} us"
    )


def pct(values: list[float], p: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(round(p / 100 * (len(values) - 1))))]


def fmt(values: list[float]) -> str:
    if not values:
        return "no samples"
    return f"p50 {pct(values, 50):7.2f} ms   p99 {pct(values, 99):7.2f} ms   (n={len(values)})"


class Emitter:
    def __init__(self, host):
        env = {k: v for k, v in os.environ.items() if not k.startswith("HOST_")}
        env.pop("REDIS_URL", None)
        env.update(
            HOST_STATE_DIR=str(host.state_dir),
            HOST_PORT=str(host.base_port),
            DJANGO_SETTINGS_MODULE="hostmgmt.settings",
            HOST_LOG_LEVEL="WARNING",
        )
        self.proc = subprocess.Popen(
            [sys.executable, "-c", EMITTER],
            cwd=ROOT,
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )

    def emit(self, kind: str, count: int, interval_ms: float = 0.0) -> None:
        self.proc.stdin.write(json.dumps([kind, count, interval_ms]) + "\n")
        self.proc.stdin.flush()
        assert self.proc.stdout.readline().strip() == "ok"

    def close(self) -> None:
        self.proc.stdin.close()
        self.proc.wait(10)


def redis_floor(url: str, n: int = 1000) -> list[float]:
    """Bare publish→subscribe round trip on the same Redis: the floor of any live delivery."""
    pub = redis.Redis.from_url(url)
    sub = redis.Redis.from_url(url).pubsub()
    sub.subscribe("bench:floor")
    sub.get_message(timeout=2)
    out = []
    for _ in range(n):
        start = time.perf_counter_ns()
        pub.publish("bench:floor", b"x" * 120)
        while sub.get_message(timeout=2) is None:
            pass
        out.append((time.perf_counter_ns() - start) / 1e6)
    sub.close()
    return out


async def subscriber(cafile, base, path, headers, want: int, sink: list, ready, counts):
    from bench.http1 import EventStream

    stream = await EventStream.open(base, cafile, path, headers)
    try:
        assert stream.status == 200, stream.status
        counts["open"] += 1
        if counts["open"] == counts["total"]:
            ready.set()
        got = 0
        async for arrived_ns, line in stream.lines():
            if line.startswith(b"data: "):
                event = json.loads(line[6:])
                sent = int(event.get("source") or event.get("id"))
                sink.append((event["seq"], (arrived_ns - sent) / 1e6))
                got += 1
                if got >= want:
                    return
    finally:
        stream.close()


async def _client_streams(cafile, url, token, n_subs, n_events, ready_q, out_q):
    """The streams are read at the socket (bench/http1.EventStream), each event stamped when
    its bytes arrive. With httpx parsing each stream, 100 streams in one process queued
    behind each other in the client, and the last stream's figure measured that queue."""
    headers = {"Authorization": f"Bearer {token}"}
    base, _, rest = url.partition("://")
    origin, _, path = rest.partition("/")
    sinks = [[] for _ in range(n_subs)]
    ready = asyncio.Event()
    counts = {"open": 0, "total": n_subs}
    tasks = [
        asyncio.create_task(
            subscriber(
                cafile, f"{base}://{origin}", "/" + path, headers, n_events, s, ready, counts
            )
        )
        for s in sinks
    ]
    await asyncio.wait_for(ready.wait(), 240)
    cpu0 = time.process_time()
    ready_q.put(n_subs)
    await asyncio.wait_for(asyncio.gather(*tasks), 600)
    out_q.put((sinks, time.process_time() - cpu0))


def client_process(*args) -> None:
    """One client process: its share of the subscribers (as separate machines would be)."""
    asyncio.run(_client_streams(*args))


PER_PROCESS = 100


def cpu_s(procs) -> tuple[float, float]:
    """(user, system) CPU seconds of `procs` together: system is mostly the kernel's loopback
    TCP and TLS sends."""
    times = [p.cpu_times() for p in procs]
    return sum(t.user for t in times), sum(t.system for t in times)


def host_daphnes(host) -> list:
    """The host's web processes (HOST_WEB_PROCESSES daphnes)."""
    out = []
    for proc in psutil.Process(host.proc.pid).children(recursive=True):
        try:
            if "hostmgmt.daphne_main" in " ".join(proc.cmdline()):
                out.append(proc)
        except psutil.Error:
            pass
    return out


async def run_subscribers(host, n_subs: int, emit, n_events: int, interval_ms: float, floor=None):
    """`n_subs` streams spread over client processes (at most PER_PROCESS each), none in the
    host's processes; returns every stream's (seq, latency ms), the delivery time, and the CPU
    seconds daphne and the clients spent from the first emit to the last frame read.
    `floor`: (port, daphne processes) of the bare ASGI app, read instead of the host."""
    import multiprocessing as mp

    spawn = mp.get_context("spawn")
    ready_q, out_q = spawn.Queue(), spawn.Queue()
    start = (await asyncio.to_thread(_current_seq, host)) or 0
    base = host.url if floor is None else f"https://127.0.0.1:{floor[0]}"
    url = f"{base}/api/v1/events?kinds=library.*&since={start}"
    shares = [PER_PROCESS] * (n_subs // PER_PROCESS) + (
        [n_subs % PER_PROCESS] if n_subs % PER_PROCESS else []
    )
    procs = [
        spawn.Process(
            target=client_process,
            args=(str(host.cert_path), url, host.mgmt_token, k, n_events, ready_q, out_q),
        )
        for k in shares
    ]
    for proc in procs:
        proc.start()
    try:
        for _ in procs:
            await asyncio.to_thread(ready_q.get, True, 300)
        await asyncio.sleep(0.5)
        daphne = host_daphnes(host) if floor is None else floor[1]
        daphne_cpu = cpu_s(daphne)
        t0 = time.perf_counter()
        await asyncio.to_thread(emit, "library.changed", n_events, interval_ms)
        sinks, client_cpu = [], 0.0
        for _ in procs:
            share, cpu = await asyncio.to_thread(out_q.get, True, 600)
            sinks += share
            client_cpu += cpu
        elapsed = time.perf_counter() - t0
        daphne_cpu = tuple(b - a for a, b in zip(daphne_cpu, cpu_s(daphne), strict=True))
    finally:
        for proc in procs:
            proc.join(10)
            if proc.is_alive():
                proc.kill()
    return sinks, elapsed, (daphne_cpu, client_cpu)


def _current_seq(host) -> int:
    r = redis.Redis.from_url(f"unix://{host.state_dir / 'redis.sock'}")
    raw = r.get("hostmgmt:events:seq")
    return int(raw) if raw else 0


def hook_latency(host, emitter: Emitter, n: int) -> list[float]:
    out = Path(tempfile.mkdtemp(prefix="bench-hook-")) / "starts"
    doc = {
        "hooks": [{"on": "plugins.changed", "run": f'echo "$PF_EVENT_ID $(date +%s%N)" >> {out}'}]
    }
    with host.mgmt() as c:
        assert c.put("/api/v1/hooks", json=doc).status_code == 200
    emitter.emit("plugins.changed", n, 100)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if out.exists() and len(out.read_text().splitlines()) >= n:
            break
        time.sleep(0.2)
    lat = []
    for line in out.read_text().splitlines():
        sent, started = line.split()
        lat.append((int(started) - int(sent)) / 1e6)
    with host.mgmt() as c:
        c.put("/api/v1/hooks", json={"hooks": []})
    return lat


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--events", type=int, default=200)
    parser.add_argument("--sustained", type=int, default=3000)
    parser.add_argument("--subscribers", default="1,10,100,500")
    parser.add_argument("--no-hooks", action="store_true", help="skip the hook start figure")
    parser.add_argument(
        "--floor-subscribers",
        default="10,100,500",
        help="subscriber counts also measured against the bare ASGI app",
    )
    parser.add_argument(
        "--processes",
        type=int,
        default=web_listener.default_processes(),
        help="web processes of the host, and daphnes of the floor (default: the host's default)",
    )
    args = parser.parse_args()
    counts = [int(n) for n in args.subscribers.split(",")]
    floor_counts = {int(n) for n in args.floor_subscribers.split(",") if n}
    streams = str(max(128, max(counts) + 16))  # per web process: room for all on any one
    host = start_host(
        env={
            "HOST_SSE_MAX_STREAMS": streams,
            "HOST_SSE_QUEUE_DEPTH": "4096",
            "HOST_WEB_PROCESSES": str(args.processes),
        }
    )
    emitter = Emitter(host)
    port, floor_procs = bare_daphne.start(host, "bench.asgi_sse_floor:application", args.processes)
    bare = (port, [psutil.Process(p.pid) for p in floor_procs])
    try:
        load = os.getloadavg()
        print(
            f"host on :{host.mgmt_port} with {args.processes} web process(es) (the floor on as "
            f"many), cores={os.cpu_count()}, events per run={args.events}, "
            f"subscribers in client processes of {PER_PROCESS} at most, "
            f"load average {load[0]:.1f} {load[1]:.1f} {load[2]:.1f}"
        )
        floor = redis_floor(f"unix://{host.state_dir / 'redis.sock'}")
        print(f"baseline  bare Redis pub→sub round trip      {fmt(floor)}")
        for n_subs in counts:
            sinks, _, cpu = asyncio.run(
                run_subscribers(host, n_subs, emitter.emit, args.events, 20.0)
            )
            lat = [ms for sink in sinks for _, ms in sink]
            print(f"emit→SSE  {n_subs:3d} subscriber(s), 20 ms apart    {fmt(lat)}")
            print(f"          CPU per frame delivered: {per_frame(cpu, len(lat))}")
            if n_subs not in floor_counts:
                continue
            sinks, _, cpu = asyncio.run(
                run_subscribers(host, n_subs, emitter.emit, args.events, 20.0, bare)
            )
            base = [ms for sink in sinks for _, ms in sink]
            print(f"  floor   bare ASGI app, same daphne+TLS     {fmt(base)}")
            print(f"          CPU per frame delivered: {per_frame(cpu, len(base))}")
            if lat and base:
                print(
                    f"          host ÷ floor: p50 {pct(lat, 50) / pct(base, 50):.2f}x, "
                    f"p99 {pct(lat, 99) / pct(base, 99):.2f}x"
                )
        sinks, elapsed, cpu = asyncio.run(
            run_subscribers(host, 10, emitter.emit, args.sustained, 0)
        )
        complete = all(
            [s for s, _ in sink] == sorted({s for s, _ in sink}) and len(sink) == args.sustained
            for sink in sinks
        )
        rate = args.sustained / elapsed
        print(
            f"sustained 10 subscribers: {args.sustained} events in {elapsed:.2f} s = "
            f"{rate:,.0f} events/s each ({rate * 10:,.0f} frames/s total), "
            f"{'no loss, in order' if complete else 'LOSS OR DISORDER'}"
        )
        print(f"          CPU per frame delivered: {per_frame(cpu, args.sustained * 10)}")
        sinks, elapsed, cpu = asyncio.run(
            run_subscribers(host, 10, emitter.emit, args.sustained, 0, bare)
        )
        complete = all(len(sink) == args.sustained for sink in sinks)
        floor_rate = args.sustained / elapsed
        print(
            f"  floor   bare ASGI app: {floor_rate:,.0f} events/s each, "
            f"{'no loss' if complete else 'LOSS'}; host ÷ floor {rate / floor_rate:.2f}x"
        )
        print(f"          CPU per frame delivered: {per_frame(cpu, args.sustained * 10)}")
        if not args.no_hooks:
            hooks = hook_latency(host, emitter, min(args.events, 100))
            print(f"event→hook process start (sh + date)     {fmt(hooks)}")
        load = os.getloadavg()
        print(f"load average at the end {load[0]:.1f} {load[1]:.1f} {load[2]:.1f}")
    finally:
        emitter.close()
        bare_daphne.stop(floor_procs)
        host.stop()


if __name__ == "__main__":
    main()
