"""Soak: the real host under steady load for a long time, minute by minute.

Run by hand: `.venv/bin/python bench/soak.py [--minutes 60] [--json out.json]`.

One real host (`manage.py runhost`: supervisor, Redis, daphne over TLS, both Celery workers,
the compat listener, the session manager) and, in processes of their own so the load never
runs inside the host:
- one async load process (httpx): 32 SSE subscribers on `GET /api/v1/events` (checking order
  and `dropped`, resuming with Last-Event-ID), and 200 requests a second, open loop, across the
  mgmt API (bearer `/api/v1/...`) and the admin API (Basic `/api/...`): mostly reads, and a
  custom library entry created and deleted every few seconds (each a `library.changed`);
- hooks firing on those events: a command hook (appends a line to a file) and a webhook to a
  real HTTPS receiver in this process (on a non-loopback address: the host refuses loopback);
- one compat stream at 1280x720@60 to moonlight-python (moonlight-common-c), Desktop with a
  moving noise window drawn into the session's display; the client counts frames and the
  longest gap between two.

Every minute it prints a row: requests, p50/p99 latency, errors by kind, SSE events, hook runs
and webhook deliveries, the stream's fps and longest freeze, and the RSS and open fds of every
host process by role (psutil). At the end: the growth of RSS/fds between minute 2 (after the
warm-up) and the last minute, per long-lived role. `--json` writes the whole report.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import json
import os
import secrets
import signal
import ssl
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

SSE_MAX_STREAMS = 48  # 32 subscribers and room for a reconnect racing its old stream's close
# Errors are requests that failed: an HTTP error, a broken connection, no answer within
# REQUEST_TIMEOUT_S, or one the load could not send because MAX_INFLIGHT were already waiting
# (`client_backlog`: the host 5 s behind). A shorter stall is latency, in p99 and max.
MAX_INFLIGHT = 1000
REQUEST_TIMEOUT_S = 10.0
POOL_CONNECTIONS = 32  # keep-alive connections the request mix shares (a fleet of dashboards)
ADMIN = ("admin", "soak-" + secrets.token_hex(6))
# Roles whose processes come and go with the load (a hook command per event): no growth check.
TRANSIENT = ("hook-cmd",)


def pct(values: list[float], p: float) -> float | None:
    if not values:
        return None
    values = sorted(values)
    return round(values[min(len(values) - 1, int(round(p / 100 * (len(values) - 1))))], 2)


# -- load process: SSE subscribers and the request mix ----------------------------------------
class Minute:
    def __init__(self) -> None:
        self.lat: list[float] = []
        self.by_path: dict[str, list[float]] = collections.defaultdict(list)
        self.errors: collections.Counter = collections.Counter()
        self.requests = 0
        self.writes = 0
        self.sse_events = 0


def request_mix() -> list[tuple[str, str, int]]:
    """(api, path, weight): reads a dashboard and scripts make, on both APIs."""
    return [
        ("mgmt", "/api/v1/health", 10),
        ("mgmt", "/api/v1/host", 10),
        ("mgmt", "/api/v1/status", 15),
        ("mgmt", "/api/v1/library", 10),
        ("mgmt", "/api/v1/hooks", 5),
        ("mgmt", "/api/v1/streams", 5),
        ("mgmt", "/api/v1/display/state", 5),
        ("mgmt", "/api/v1/host/config", 5),
        ("admin", "/api/config", 10),
        ("admin", "/api/apps", 8),
        ("admin", "/api/clients/list", 5),
        ("admin", "/api/stream/latency", 5),
        ("admin", "/api/stream/network-stats", 5),
        ("admin", "/api/sessions", 2),
    ]


async def load_main(args) -> None:
    import random

    import httpx

    from bench.http1 import Pool, basic_auth

    ctx = ssl.create_default_context(cafile=args.cafile)
    bearer = {"Authorization": f"Bearer {os.environ['SOAK_TOKEN']}"}
    basic = {"Authorization": basic_auth(args.admin_user, os.environ["SOAK_ADMIN_PASSWORD"])}
    # Requests go over the lean keep-alive pool (httpx's CPU per request starved this process
    # before the host at 200 req/s); the long-lived SSE streams stay on httpx.
    pool = Pool(args.url, args.cafile, POOL_CONNECTIONS)
    limits = httpx.Limits(max_connections=args.subscribers + 8)
    minute = Minute()
    sse_seen = [0] * args.subscribers
    stop = asyncio.Event()
    rng = random.Random(7)
    mix = request_mix()
    paths, weights = [m[:2] for m in mix], [m[2] for m in mix]

    def flush(index: int) -> None:
        nonlocal minute
        m, minute = minute, Minute()
        row = {
            "minute": index,
            "requests": m.requests,
            "writes": m.writes,
            "p50_ms": pct(m.lat, 50),
            "p99_ms": pct(m.lat, 99),
            "max_ms": round(max(m.lat), 1) if m.lat else None,
            "errors": dict(m.errors),
            "sse_events": m.sse_events,
            "sse_min_per_subscriber": min(sse_seen),
            "p50_ms_by_path": {k: pct(v, 50) for k, v in sorted(m.by_path.items())},
        }
        print(json.dumps(row), flush=True)

    async with httpx.AsyncClient(
        base_url=args.url, verify=ctx, limits=limits, timeout=httpx.Timeout(30, connect=10)
    ) as client:

        async def subscriber(i: int) -> None:
            last = None
            while not stop.is_set():
                headers = dict(bearer)
                if last is not None:
                    headers["Last-Event-ID"] = str(last)
                try:
                    async with client.stream("GET", "/api/v1/events", headers=headers,
                                             timeout=httpx.Timeout(10, read=60)) as r:  # fmt: skip
                        if r.status_code != 200:
                            minute.errors[f"sse_http_{r.status_code}"] += 1
                            await asyncio.sleep(1)
                            continue
                        kind = None
                        async for line in r.aiter_lines():
                            if line.startswith("event: "):
                                kind = line[7:]
                                if kind == "dropped":
                                    minute.errors["sse_dropped"] += 1
                            elif line.startswith("id: "):
                                seq = int(line[4:])
                                if last is not None and seq <= last:
                                    minute.errors["sse_order"] += 1
                                last = seq
                            elif line.startswith("data: ") and kind != "dropped":
                                minute.sse_events += 1
                                sse_seen[i] += 1
                    if not stop.is_set():
                        minute.errors["sse_closed"] += 1
                except (httpx.HTTPError, OSError) as exc:
                    if not stop.is_set():
                        minute.errors[f"sse_{type(exc).__name__}"] += 1
                        await asyncio.sleep(0.5)

        requests = {(api, path): pool.build("GET", path, bearer if api == "mgmt" else basic)
                    for api, path in paths}  # fmt: skip

        async def one(api: str, path: str) -> None:
            t0 = time.perf_counter()
            try:
                r = await asyncio.wait_for(pool.request(requests[api, path]), REQUEST_TIMEOUT_S)
            except (OSError, asyncio.IncompleteReadError, ValueError, TimeoutError) as exc:
                minute.errors[f"{type(exc).__name__}"] += 1
                return
            finally:
                minute.requests += 1
            minute.lat.append(ms := (time.perf_counter() - t0) * 1000)
            minute.by_path[path].append(ms)
            if r.status != 200:
                minute.errors[f"http_{r.status} {path}"] += 1

        async def writer() -> None:
            """A custom library entry created, then deleted on the next turn: library.changed
            events for the subscribers and the hooks."""
            n, made = 0, None
            while not stop.is_set():
                await asyncio.sleep(args.write_every)
                n += 1
                t0 = time.perf_counter()
                try:
                    if made is None:
                        body = json.dumps({"title": f"Soak entry {n}"}).encode()
                        headers = {**bearer, "Content-Type": "application/json"}
                        raw = pool.build("POST", "/api/v1/library/custom", headers, body)
                        r = await asyncio.wait_for(pool.request(raw), REQUEST_TIMEOUT_S)
                        ok = r.status == 201
                        made = r.json().get("id") if ok else None
                    else:
                        path = f"/api/v1/library/custom/{made}"
                        raw = pool.build("DELETE", path, bearer)
                        r = await asyncio.wait_for(pool.request(raw), REQUEST_TIMEOUT_S)
                        ok, made = r.status in (200, 204), None
                    minute.lat.append((time.perf_counter() - t0) * 1000)
                    minute.writes += 1
                    if not ok:
                        minute.errors[f"write_http_{r.status}"] += 1
                except (OSError, asyncio.IncompleteReadError, ValueError, TimeoutError) as exc:
                    minute.errors[f"write_{type(exc).__name__}"] += 1
                finally:
                    minute.requests += 1

        subs = [asyncio.create_task(subscriber(i)) for i in range(args.subscribers)]
        await asyncio.sleep(2)  # every stream open before the clock starts
        await pool.warm(pool.build("GET", "/api/v1/health", bearer))  # and every connection
        start = time.monotonic()
        wtask = asyncio.create_task(writer())
        inflight: set[asyncio.Task] = set()
        tick = 0.05
        issued = 0
        next_tick = start
        index = 1
        end = start + args.minutes * args.window_s
        while time.monotonic() < end:
            # Open loop on the clock: a late tick issues what the missed ones owed.
            due = int(args.rps * (time.monotonic() - start))
            while issued < due:
                issued += 1
                if len(inflight) >= MAX_INFLIGHT:  # the host is behind: count it, do not pile on
                    minute.errors["client_backlog"] += 1
                    continue
                api, path = rng.choices(paths, weights)[0]
                task = asyncio.create_task(one(api, path))
                inflight.add(task)
                task.add_done_callback(inflight.discard)
            if time.monotonic() >= start + index * args.window_s:
                flush(index)
                index += 1
            next_tick += tick
            await asyncio.sleep(max(0.0, next_tick - time.monotonic()))
        if inflight:
            await asyncio.wait(inflight, timeout=15)
        flush(index)
        stop.set()
        pool.close()
        wtask.cancel()
        for t in subs:
            t.cancel()
        await asyncio.gather(wtask, *subs, return_exceptions=True)


# -- stream client process: one compat stream, frames counted ---------------------------------
def stream_main(args) -> None:
    import hashlib

    import httpx
    from moonlight_python.config import StreamConfig
    from moonlight_python.http_client import NvHTTP
    from moonlight_python.identity import Identity
    from moonlight_python.stream import StreamingSession

    from bench.stream import Drawer, parse_mode

    w, h, fps = parse_mode(args.mode)
    identity = Identity(args.config_dir)
    fingerprint = hashlib.sha256(identity.cert_der).hexdigest()
    http = NvHTTP("127.0.0.1", identity, http_port=args.base, https_port=args.base - 5)
    desktop = next(a for a in http.get_app_list() if a.name == "Desktop")
    key, iv = secrets.token_bytes(16), secrets.token_bytes(16)
    session = StreamingSession()
    config = StreamConfig(width=w, height=h, fps=fps, bitrate_kbps=10000)
    url = http.launch_app(desktop.id, w, h, fps, 10000, 1, key, iv, config.surroundaudioinfo,
                          launch_query_params=session.get_launch_query_params())  # fmt: skip
    session.start(address="127.0.0.1", app_version="7.1.431.-1", gfe_version="3.23.0.74",
                  server_codec_mode_support=1, rtsp_session_url=url, config=config,
                  ri_aes_key=key, ri_aes_iv=iv, capture_audio=False)  # fmt: skip
    r = httpx.get(f"{args.url}/api/v1/display/state", verify=args.cafile,
                  headers={"Authorization": f"Bearer {os.environ['SOAK_TOKEN']}"})  # fmt: skip
    (disp,) = [d for d in r.json()["displays"]
               if d["state"] == "active" and d["client"] == fingerprint]  # fmt: skip
    drawer = Drawer(disp["x_display"], w, h)
    drawer.start()
    lock = threading.Lock()
    state = {"frames": 0, "last": time.monotonic(), "max_gap": 0.0, "ended": False}

    def pull() -> None:
        while (raw := session.pull_frame()) is not None:
            del raw
            now = time.monotonic()
            with lock:
                state["frames"] += 1
                state["max_gap"] = max(state["max_gap"], now - state["last"])
                state["last"] = now
        state["ended"] = True

    threading.Thread(target=pull, daemon=True).start()
    stop_file = Path(args.config_dir) / "stop"
    print(json.dumps({"started": url}), flush=True)
    while not stop_file.exists() and not state["ended"]:
        time.sleep(1)
        now = time.monotonic()
        with lock:
            gap = max(state["max_gap"], now - state["last"])
            row = {"t": time.time(), "frames": state["frames"], "max_gap_s": round(gap, 3)}
            state["frames"], state["max_gap"] = 0, 0.0
        print(json.dumps(row), flush=True)
    print(json.dumps({"ended_by_host": state["ended"]}), flush=True)
    drawer.stop.set()
    session.stop()
    drawer.join(1)
    http.quit_app()


# -- processes of the host, by role -----------------------------------------------------------
def host_processes(supervisor_pid: int) -> dict[str, object]:
    """role -> psutil.Process for the supervisor and every descendant."""
    import psutil

    try:
        sup = psutil.Process(supervisor_pid)
        procs = [sup, *sup.children(recursive=True)]
    except psutil.Error:
        return {}
    by_pid = {p.pid: p for p in procs}
    roles: dict[int, str] = {supervisor_pid: "supervisor"}

    def cmd(p) -> str:
        try:
            return " ".join(p.cmdline())
        except psutil.Error:
            return ""

    for p in sorted(procs, key=lambda p: p.pid):  # parents before children (mostly)
        if p.pid in roles:
            continue
        try:
            ppid = p.ppid()
        except psutil.Error:
            continue
        parent = roles.get(ppid, "")
        c = cmd(p)
        if "redis-server" in c:
            role = "redis"
        elif "hostmgmt.daphne_main" in c:
            role = "daphne"
        elif "celery" in c and "--queues" in c and parent == "supervisor":
            role = "celery-hooks"
        elif "celery" in c and "beat" in c.split():
            role = "celery-beat"
        elif "celery" in c and parent == "supervisor":
            role = "celery"
        elif parent == "celery":
            role = "celery-pool"
        elif parent.startswith("celery-hooks") or parent == "hook-cmd":
            role = "hook-cmd"
        elif "run_compat_plane" in c:
            role = "compat-listener"
        elif "streaming.sessions.manager" in c and parent == "supervisor":
            role = "sessions-manager"
        elif parent == "sessions-manager":
            role = "session"
        elif parent.startswith("session"):
            try:
                role = f"session/{p.name()}"
            except psutil.Error:
                continue
        else:
            try:
                role = f"other/{p.name()}"
            except psutil.Error:
                continue
        roles[p.pid] = role
    out: dict[str, object] = {}
    counts: collections.Counter = collections.Counter()
    for pid in sorted(roles):
        role = roles[pid]
        counts[role] += 1
        name = role if counts[role] == 1 else f"{role}#{counts[role]}"
        out[name] = by_pid[pid]
    return out


def _fd_targets(pid: int) -> tuple[int, list[str]]:
    """The open fds of `pid`: how many are sockets (their number follows the connections open
    at that moment), and the `/proc/<pid>/fd` targets of the rest (files, pipes, eventfds), so
    a growth can name what was opened."""
    sockets, files = 0, []
    try:
        names = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return 0, []
    for fd in names:
        try:
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        if target.startswith("socket:"):
            sockets += 1
        else:
            files.append(target)
    return sockets, sorted(files)


def sample(supervisor_pid: int) -> dict[str, dict]:
    import psutil

    out = {}
    for role, p in host_processes(supervisor_pid).items():
        try:
            with p.oneshot():
                cpu = p.cpu_times()
                sockets, files = _fd_targets(p.pid)
                out[role] = {"pid": p.pid, "rss_mb": round(p.memory_info().rss / 2**20, 1),
                             "fds": p.num_fds(), "sockets": sockets, "files": files,
                             "cpu_s": round(cpu.user + cpu.system, 2),
                             "t": round(time.monotonic(), 2)}  # fmt: skip
        except psutil.Error:
            continue
    return out


# -- driver -----------------------------------------------------------------------------------
class Reader(threading.Thread):
    """Lines of a child's stdout, parsed as JSON, into a list."""

    def __init__(self, proc: subprocess.Popen) -> None:
        super().__init__(daemon=True)
        self.proc, self.rows, self.lock = proc, [], threading.Lock()

    def run(self) -> None:
        for line in self.proc.stdout:
            try:
                row = json.loads(line)
            except ValueError:
                continue
            with self.lock:
                self.rows.append(row)

    def take(self) -> list[dict]:
        with self.lock:
            rows, self.rows = self.rows, []
        return rows


def _spawn(role: str, argv: list[str], secrets_env: dict) -> subprocess.Popen:
    """Secrets go in the environment, not argv (`ps` shows argv to every user)."""
    return subprocess.Popen(
        [sys.executable, __file__, "--role", role, *argv],
        cwd=ROOT, stdout=subprocess.PIPE, text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT), **secrets_env},
    )  # fmt: skip


def client_cpu(procs: dict[str, subprocess.Popen | None]) -> dict[str, dict]:
    """CPU seconds of the load generators, so a report shows what the clients took from the
    host on the same cores."""
    import psutil

    out = {}
    for role, proc in procs.items():
        if proc is None:
            continue
        try:
            p = psutil.Process(proc.pid)
            cpu = p.cpu_times()
            out[role] = {"pid": p.pid, "cpu_s": round(cpu.user + cpu.system, 2),
                         "t": round(time.monotonic(), 2)}  # fmt: skip
        except psutil.Error:
            continue
    return out


def cpu_share(rows: list[dict]) -> dict[str, float]:
    """Per role, the percent of one core it used from minute 2 (past the warm-up) to the last
    minute, summed over its processes (`role#2`...)."""
    if len(rows) < 3:
        return {}
    first = rows[1]["procs"]
    out: dict[str, float] = collections.defaultdict(float)
    for name, a in first.items():
        # The last sample of the same process (a client that already exited has none in the
        # final row).
        b = next((r["procs"][name] for r in reversed(rows[2:]) if name in r["procs"]), None)
        if b is None or a.get("pid") != b.get("pid") or "cpu_s" not in a or b["t"] <= a["t"]:
            continue
        out[name.split("#")[0]] += 100 * (b["cpu_s"] - a["cpu_s"]) / (b["t"] - a["t"])
    return {k: round(v, 1) for k, v in sorted(out.items(), key=lambda kv: -kv[1])}


def growth(rows: list[dict]) -> dict:
    """RSS and fds per long-lived role: minute 2 (past the warm-up) against the last minute."""
    if len(rows) < 3:
        return {}
    first, last = rows[1]["procs"], rows[-1]["procs"]
    out = {}
    for role in sorted(set(first) & set(last)):
        if role.split("#")[0].startswith(TRANSIENT) or role.startswith("client/"):
            continue
        a, b = first[role], last[role]
        if a["pid"] != b["pid"]:
            out[role] = {"restarted": True}
            continue
        out[role] = {
            "rss_mb": [a["rss_mb"], b["rss_mb"]],
            "rss_growth_pct": round(100 * (b["rss_mb"] - a["rss_mb"]) / max(a["rss_mb"], 0.1), 1),
            "fds": [a["fds"], b["fds"]],
            "fd_growth": b["fds"] - a["fds"],
            # Files, pipes, eventfds: a leak here is a leak whatever the load does.
            "file_fd_growth": (b["fds"] - b["sockets"]) - (a["fds"] - a["sockets"]),
            # Which: the fd targets opened (or closed) between the two samples.
            "files_added": _minus(b["files"], a["files"]),
            "files_closed": _minus(a["files"], b["files"]),
        }
    return out


def _minus(these: list[str], those: list[str]) -> list[str]:
    """`these` less `those`, as multisets (a file open twice counts twice)."""
    return sorted((collections.Counter(these) - collections.Counter(those)).elements())


def print_row(row: dict) -> None:
    errs = sum(row["errors"].values())
    procs = row["procs"]
    procs = {k: v for k, v in procs.items() if not k.startswith("client/")}
    rss = sum(p["rss_mb"] for p in procs.values())
    fds = sum(p["fds"] for p in procs.values())
    print(f"{row['minute']:>3} {row['requests']:>6} {row['p50_ms'] or 0:>7.1f} "
          f"{row['p99_ms'] or 0:>7.1f} {row.get('max_ms') or 0:>7.0f} {errs:>5} "
          f"{row['sse_events']:>6} {row['hook_runs']:>5} "
          f"{row['webhooks']:>5} {row['stream_fps']:>6.1f} {row['stream_max_gap_s']:>6.2f} "
          f"{len(procs):>5} {rss:>8.1f} {fds:>5} {row['load']:>5.1f}", flush=True)  # fmt: skip
    if row["errors"]:
        print(f"    errors: {row['errors']}", flush=True)


HEADER = (f"{'min':>3} {'reqs':>6} {'p50ms':>7} {'p99ms':>7} {'maxms':>7} {'errs':>5} {'sse':>6} "
          f"{'hooks':>5} {'whook':>5} {'fps':>6} {'gap_s':>6} {'procs':>5} {'rss_mb':>8} "
          f"{'fds':>5} {'load':>5}")  # fmt: skip


def run(minutes: float, window_s: float = 60.0, rps: int = 200, subscribers: int = 32,
        mode: str = "1280x720x60", stream: bool = True, json_path: Path | None = None,
        write_every: float = 5.0, quiet: bool = False) -> dict:  # fmt: skip
    """The whole soak; returns the report (also written to `json_path`)."""
    from tests.hooks import helpers as hook_helpers
    from tests.support.livehost import start_host
    from tests.support.moonlight import Moonlight, post_pin

    say = (lambda *a: None) if quiet else (lambda *a: print(*a, flush=True))
    state = Path(tempfile.mkdtemp(prefix="soak-"))
    (ca_dir := state.parent / f"{state.name}-ca").mkdir()
    tls = hook_helpers.make_ca_and_cert(ca_dir)
    receiver = None
    if tls.ip != "127.0.0.1":
        receiver = hook_helpers.start_receiver(tls.ip, tls)
    hook_out = state.parent / f"{state.name}-hooks.log"
    env = {
        "HOST_SSE_MAX_STREAMS": str(SSE_MAX_STREAMS),
        "HOST_WEBHOOK_CA_BUNDLE": str(tls.ca_path),
        "HOST_LOG_LEVEL": "WARNING",
    }
    (state / "host.conf").write_text("ping_timeout = 5000\n")
    host = start_host(state_dir=state, env=env, wait=False)
    procs: list[subprocess.Popen] = []
    stream_dir = state / "client"
    report: dict = {"minutes": minutes, "window_s": window_s, "rps": rps,
                    "subscribers": subscribers, "mode": mode if stream else None,
                    "cpus": os.cpu_count(), "rows": []}  # fmt: skip
    try:
        host.wait_ready(timeout=240)
        host.set_first_admin(*ADMIN)
        hooks = [{"on": "library.*", "run": f'echo "$PF_EVENT_ID" >> {hook_out}'}]
        if receiver is not None:
            hooks.append({"on": "library.*", "webhook": receiver.url})
        with host.mgmt() as c:
            r = c.put("/api/v1/hooks", json={"hooks": hooks})
            assert r.status_code == 200, r.text
        report["webhook"] = receiver is not None
        common = ["--url", host.url, "--cafile", str(host.cert_path)]
        secrets_env = {"SOAK_TOKEN": host.mgmt_token, "SOAK_ADMIN_PASSWORD": ADMIN[1]}
        stream_reader = None
        if stream:
            ml = Moonlight(host, stream_dir)
            ml.start_pairing("4321")
            post_pin(host, ADMIN, "4321", "soak")
            ml.wait_paired()
            argv = [*common, "--base", str(host.base_port), "--config-dir", str(stream_dir),
                    "--mode", mode]  # fmt: skip
            sp = _spawn("stream", argv, secrets_env)
            procs.append(sp)
            stream_reader = Reader(sp)
            stream_reader.start()
            deadline = time.monotonic() + 90
            while not any("started" in r for r in stream_reader.rows):
                if time.monotonic() > deadline or sp.poll() is not None:
                    raise RuntimeError("the compat stream did not start")
                time.sleep(0.2)
            stream_reader.take()
        lp = _spawn("load", [*common, "--admin-user", ADMIN[0],
                             "--rps", str(rps), "--subscribers", str(subscribers),
                             "--minutes", str(minutes), "--window-s", str(window_s),
                             "--write-every", str(write_every)], secrets_env)  # fmt: skip
        procs.append(lp)
        load_reader = Reader(lp)
        load_reader.start()
        say(f"host {host.url} state {state}; {os.cpu_count()} CPUs; {rps} req/s, "
            f"{subscribers} SSE, stream {mode if stream else 'off'}, "
            f"webhook {'on' if receiver else 'off (no non-loopback address)'}")  # fmt: skip
        say(HEADER)
        hooks_seen = webhooks_seen = stream_gone = 0
        last_sample = {}
        while True:
            done = lp.poll() is not None and not load_reader.is_alive()
            rows = load_reader.take()
            for lr in rows:
                s = sample(host.proc.pid) or last_sample
                clients = {"client/load": lp, "client/stream": sp if stream else None}
                s = {**s, **client_cpu(clients)}
                last_sample = s
                n = len(hook_out.read_text().splitlines()) if hook_out.exists() else 0
                w = 0
                if receiver is not None:
                    while not receiver.requests.empty():
                        receiver.requests.get_nowait()
                        w += 1
                srows = stream_reader.take() if stream_reader else []
                frames = [r for r in srows if "frames" in r]
                errors = dict(lr["errors"])
                if stream_reader and any(r.get("ended_by_host") for r in srows):
                    errors["stream_ended"] = 1
                elif stream_reader and sp.poll() is not None and not stream_gone:
                    errors["stream_client_exited"] = stream_gone = 1
                gap = max((r["max_gap_s"] for r in frames), default=0.0)
                if stream and gap > 1.0:
                    errors["stream_freeze_gt_1s"] = sum(r["max_gap_s"] > 1.0 for r in frames)
                row = {**lr, "errors": errors, "hook_runs": n - hooks_seen, "webhooks": w,
                       "stream_fps": round(sum(r["frames"] for r in frames) / max(len(frames), 1),
                                           1),
                       "stream_max_gap_s": gap, "procs": s,
                       "load": round(os.getloadavg()[0], 1)}  # fmt: skip
                hooks_seen, webhooks_seen = n, webhooks_seen + w
                report["rows"].append(row)
                print_row(row) if not quiet else None
            if done:
                break
            time.sleep(0.5)
        if lp.returncode != 0:
            report.setdefault("failures", []).append(f"load process exited {lp.returncode}")
    finally:
        if stream:
            (stream_dir / "stop").parent.mkdir(parents=True, exist_ok=True)
            (stream_dir / "stop").write_text("")
        for p in procs:
            try:
                p.wait(30)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        code = host.stop(timeout=60)
        report["host_exit"] = code
        if receiver is not None:
            receiver.close()
    report["errors_total"] = dict(sum((collections.Counter(r["errors"]) for r in report["rows"]),
                                      collections.Counter()))  # fmt: skip
    report["growth"] = growth(report["rows"])
    report["cpu_pct_of_core"] = cpu_share(report["rows"])
    if json_path is not None:
        tmp = json_path.with_suffix(".tmp")
        tmp.write_text(json.dumps(report, indent=1))
        os.replace(tmp, json_path)
    if not quiet:
        print_summary(report)
    return report


def print_summary(report: dict) -> None:
    print(f"\nerrors over the run: {report['errors_total'] or 'none'}")
    print("growth, minute 2 -> last (long-lived processes):")
    print(f"  {'role':<24} {'rss MB':>16} {'rss %':>7} {'fds':>10} {'fd +':>5} {'file fd +':>9}")
    for role, g in report["growth"].items():
        if g.get("restarted"):
            print(f"  {role:<24} RESTARTED")
            continue
        print(f"  {role:<24} {g['rss_mb'][0]:>7.1f} -> {g['rss_mb'][1]:>6.1f} "
              f"{g['rss_growth_pct']:>6.1f}% {g['fds'][0]:>4} -> {g['fds'][1]:>3} "
              f"{g['fd_growth']:>5} {g['file_fd_growth']:>9}")  # fmt: skip
        for what in ("added", "closed"):
            if g.get(f"files_{what}"):
                print(f"  {'':<24} files {what}: {', '.join(g[f'files_{what}'])}")
    if report.get("cpu_pct_of_core"):
        print("CPU, minute 2 -> last, % of one core (the machine has "
              f"{report['cpus']} x 100 %):")  # fmt: skip
        for role, pct_core in report["cpu_pct_of_core"].items():
            print(f"  {role:<24} {pct_core:>6.1f}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--role", default="driver", choices=["driver", "load", "stream"])
    ap.add_argument("--minutes", type=float, default=60)
    ap.add_argument("--window-s", type=float, default=60, help="length of one report row")
    ap.add_argument("--rps", type=int, default=200)
    ap.add_argument("--subscribers", type=int, default=32)
    ap.add_argument("--mode", default="1280x720x60")
    ap.add_argument("--no-stream", action="store_true")
    ap.add_argument("--write-every", type=float, default=5.0)
    ap.add_argument("--json", type=Path)
    ap.add_argument("--url")
    ap.add_argument("--cafile")
    ap.add_argument("--admin-user")
    ap.add_argument("--base", type=int)
    ap.add_argument("--config-dir")
    args = ap.parse_args()
    if args.role == "load":
        asyncio.run(load_main(args))
    elif args.role == "stream":
        stream_main(args)
    else:
        # A SIGTERM (timeout, kill) runs the `finally` that stops the host and the clients.
        signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
        run(args.minutes, args.window_s, args.rps, args.subscribers, args.mode,
            not args.no_stream, args.json, args.write_every)  # fmt: skip


if __name__ == "__main__":
    main()
