"""Benchmark of concurrent compat sessions against the real client. Run by hand:
`.venv/bin/python bench/concurrent_sessions.py [--seconds 12] [--counts 1,2,3]
[--mode 1280x720x60]`.

(Not `bench/concurrent.py`: that name shadows the standard library's `concurrent` package for
every script in bench/.)

One host (`max_sessions = 3`, Xvfb displays, libx264) and three paired moonlight-python
clients. For each count n it starts n client processes at the same instant; each launches
Desktop at the mode, draws bench/stream.py's frame counter (and its moving noise window)
into its own session's display, decodes every frame as it arrives and reads the counter
back (from the luma plane: no BGR conversion). Once every client draws, the driver opens one
measuring window (`--seconds`, after `--warm`) for all of them, and samples /proc: the CPU time
of every process over the same window, grouped as each session process (the session manager's
forked children), the Xvfb servers, the rest of the host, each client process (the bench's
cost: it decodes every frame on the same cores) and what other jobs took ("outside").

Figures per session: fps delivered, glass-to-glass p50/p99 (counter drawn -> frame decoded
showing it), the CPU share of its session process, the engine's CPU per frame by stage
(capture, convert, encode, packetize+FEC, encrypt, send: the line each stream logs at its end,
whole stream), its wall time per frame and schedule restarts, and the client's CPU per decoded
frame; per count: the machine's busy share and the load at both ends of the window, and each
figure against the single-session baseline of the same run. On a shared machine fps follows
the other jobs: compare CPU per frame. Goal: two sessions both >= 55 fps at 720p60.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import secrets
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.stream import Drawer, parse_mode, pct, read_counter, write_conf  # noqa: E402

CLK = os.sysconf("SC_CLK_TCK")


def luma(pic) -> np.ndarray:
    """A decoded frame's Y plane as it lies in the decoder's buffer (H x stride), no copy.

    The counter's cells are white or black, so luma reads them as well as BGR does; a BGR
    conversion of every 720p frame was the bench client's largest cost after the decode, CPU
    the clients took from the sessions they measure on the same two cores."""
    plane = pic.planes[0]
    return np.frombuffer(plane, np.uint8).reshape(pic.height, plane.line_size)


# -- client side (a subprocess each: moonlight-common-c keeps global state) -------------------
def client(args) -> None:
    import av
    import httpx
    from moonlight_python.config import StreamConfig
    from moonlight_python.http_client import NvHTTP
    from moonlight_python.identity import Identity
    from moonlight_python.stream import StreamingSession

    w, h, fps = parse_mode(args.mode)
    identity = Identity(args.config_dir)
    fingerprint = hashlib.sha256(identity.cert_der).hexdigest()
    http = NvHTTP("127.0.0.1", identity, http_port=args.base, https_port=args.base - 5)
    desktop = next(a for a in http.get_app_list() if a.name == "Desktop")
    key, iv = secrets.token_bytes(16), secrets.token_bytes(16)
    session = StreamingSession()
    config = StreamConfig(width=w, height=h, fps=fps, bitrate_kbps=10000)
    extra = session.get_launch_query_params()
    time.sleep(max(0.0, args.start_at - time.time()))
    url = http.launch_app(desktop.id, w, h, fps, 10000, 1, key, iv, config.surroundaudioinfo,
                          launch_query_params=extra)  # fmt: skip
    session.start(address="127.0.0.1", app_version="7.1.431.-1", gfe_version="3.23.0.74",
                  server_codec_mode_support=1, rtsp_session_url=url, config=config,
                  ri_aes_key=key, ri_aes_iv=iv, capture_audio=False)  # fmt: skip
    r = httpx.get(f"{args.url}/api/v1/display/state", verify=args.cafile,
                  headers={"Authorization": f"Bearer {args.token}"})  # fmt: skip
    (disp,) = [d for d in r.json()["displays"]
               if d["state"] == "active" and d["client"] == fingerprint]  # fmt: skip
    drawer = Drawer(disp["x_display"], w, h)
    drawer.start()
    decoder = av.CodecContext.create("h264", "r")
    g2g, times, torn = [], [], 0
    # Measure only while every session of this round streams: the driver writes `go` (the
    # wall-clock start of the window) once every client has said it is drawing.
    go = Path(args.config_dir) / "go"
    (Path(args.config_dir) / "drawing").write_text("")
    start = end = None
    while end is None or time.time() < end:
        if end is None and go.exists() and go.read_text():
            start = float(go.read_text())
            end = start + args.seconds
        raw = session.pull_frame()
        if raw is None:
            break
        for pic in decoder.decode(av.Packet(raw.annex_b_data)):
            if start is None or time.time() < start:
                continue
            now = time.monotonic()
            times.append(now)
            n = read_counter(luma(pic))
            if n is None:
                torn += 1
            elif n in drawer.drawn:
                g2g.append((now - drawer.drawn[n]) * 1000)
    drawer.stop.set()
    session.stop()
    drawer.join(1)
    drawer.d.close()
    http.quit_app()
    span = times[-1] - times[0] if len(times) > 1 else 0
    print(json.dumps({
        "rtsp": url.rsplit(":", 1)[-1],
        "fps": round((len(times) - 1) / span, 1) if span else 0,
        "frames": len(times),
        "torn": torn,
        "g2g_p50": pct(g2g, 50),
        "g2g_p99": pct(g2g, 99),
    }))  # fmt: skip


# -- driver ------------------------------------------------------------------------------------
def _ticks(pid: int) -> int | None:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return int(fields[11]) + int(fields[12])  # utime + stime


def _busy() -> tuple[int, int]:
    cpu = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    idle = cpu[3] + cpu[4]
    return sum(cpu) - idle, sum(cpu)


def all_ticks() -> dict[int, int]:
    """pid -> CPU ticks so far, for every process on the machine."""
    out = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            ticks = _ticks(int(entry))
            if ticks is not None:
                out[int(entry)] = ticks
    return out


def process_table() -> dict[int, tuple[int, str]]:
    """pid -> (parent pid, command name) of every process on the machine."""
    table = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                head, tail = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)
                table[int(entry)] = (int(tail.split()[1]), head.split("(", 1)[1])
            except (OSError, IndexError, ValueError):
                continue
    return table


def host_groups(host_pid: int, mgr: int) -> dict[str, list[int]]:
    """The host's processes by role: each session process, the X servers, everything else."""
    table = process_table()
    children: dict[int, list[int]] = {}
    for pid, (ppid, _) in table.items():
        children.setdefault(ppid, []).append(pid)
    groups: dict[str, list[int]] = {"xvfb": [], "host other": [host_pid]}
    todo = [host_pid]
    while todo:
        for pid in children.get(todo.pop(), []):
            todo.append(pid)
            if table[pid][0] == mgr:
                groups[f"session {pid}"] = [pid]
            elif table[pid][1].startswith("Xvfb"):
                groups["xvfb"].append(pid)
            else:
                groups["host other"].append(pid)
    return groups


def stage_figures(log_text: str) -> dict[str, dict]:
    """RTSP port -> the engine's per-stage CPU per frame, from its line at stream end."""
    out = {}
    for line in log_text.splitlines():
        if "video CPU per frame over" in line:
            head, figures = line.rsplit(" (ms): ", 1)
            words = head.split()
            port = words[words.index("port") + 1].rstrip(",")
            frames = int(words[words.index("over") + 1])
            restarts = int(words[words.index("restarts") - 2])
            out[port] = {"frames": frames, "restarts": restarts, **json.loads(figures)}
    return out


def manager_pid(host) -> int:
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                cmd = Path(f"/proc/{entry}/cmdline").read_bytes()
                env = Path(f"/proc/{entry}/environ").read_bytes()
            except OSError:
                continue
            if b"streaming.sessions.manager" in cmd and str(host.state_dir).encode() in env:
                return int(entry)
    raise RuntimeError("no session manager found")


def run_round(host, clients: list[Path], args) -> dict:
    for cfg in clients:
        for name in ("go", "drawing"):
            (cfg / name).unlink(missing_ok=True)
    start_at = time.time() + 6  # the client processes import the client library meanwhile
    log_at = len(host.log_path.read_text(errors="replace"))  # this round's lines come after
    procs = [
        subprocess.Popen(
            [
                sys.executable,
                __file__,
                "--client",
                "--base",
                str(host.base_port),
                "--config-dir",
                str(cfg),
                "--url",
                host.url,
                "--token",
                host.mgmt_token,
                "--cafile",
                str(host.cert_path),
                "--mode",
                args.mode,
                "--seconds",
                str(args.seconds),
                "--start-at",
                repr(start_at),
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=ROOT,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
        )
        for cfg in clients
    ]
    mgr = manager_pid(host)
    deadline = time.monotonic() + 120
    while not all((cfg / "drawing").exists() for cfg in clients):
        if time.monotonic() > deadline or any(p.poll() is not None for p in procs):
            break
        time.sleep(0.2)
    window = time.time() + args.warm  # past every session's first IDR and warm-up
    for cfg in clients:
        tmp = cfg / "go.tmp"
        tmp.write_text(repr(window))
        os.replace(tmp, cfg / "go")
    time.sleep(max(0.0, window - time.time()))
    # Every process's CPU at both ends of the window; the roles come from the process tree at
    # both ends (a process that started meanwhile counts from zero, one that ended is lost).
    load0 = os.getloadavg()[0]
    t0, groups0, ticks0, busy0 = (
        time.monotonic(),
        host_groups(host.proc.pid, mgr),
        all_ticks(),
        _busy(),
    )
    time.sleep(args.seconds)
    dt, ticks1, busy1 = time.monotonic() - t0, all_ticks(), _busy()
    groups = host_groups(host.proc.pid, mgr)
    load1 = os.getloadavg()[0]
    for name, members in groups0.items():
        groups.setdefault(name, [])
        groups[name] = sorted(set(groups[name]) | set(members))
    for i, proc in enumerate(procs):
        groups[f"client {i}"] = [proc.pid]

    def share(members: list[int]) -> float:
        """% of one core over the window."""
        ticks = sum(ticks1[p] - ticks0.get(p, 0) for p in members if p in ticks1)
        return round(100 * ticks / CLK / dt, 1)

    processes = {name: share(members) for name, members in groups.items()}
    cpu = sorted(round(v) for k, v in processes.items() if k.startswith("session"))
    ncpu = os.cpu_count() or 1
    machine = round(100 * (busy1[0] - busy0[0]) / max(busy1[1] - busy0[1], 1))
    processes["outside the bench"] = round(
        max(0.0, machine * ncpu - sum(processes.values())), 1
    )  # other jobs on a shared machine
    sessions = []
    for proc in procs:
        out, err = proc.communicate(timeout=args.seconds + 120)
        if proc.returncode != 0:
            print(f"client failed:\n{err[-2000:]}", file=sys.stderr)
            sessions.append({"error": "client failed"})
            continue
        sessions.append(json.loads(out.strip().splitlines()[-1]))
    time.sleep(2)  # the sessions end and hand their displays back
    stages = stage_figures(host.log_path.read_text(errors="replace")[log_at:])
    for i, sess in enumerate(sessions):
        sess["stages_ms"] = stages.get(sess.get("rtsp"), {})
        client_ms = (
            processes.get(f"client {i}", 0) * 10 / max(sess.get("fps", 0), 1)
        )  # % of a core -> ms per frame (10 ms of a core per % per second)
        sess["client_ms_per_frame"] = round(client_ms, 2)
    return {"count": len(clients), "sessions": sessions, "cpu_per_session_pct": cpu,
            "processes_pct": processes, "machine_busy_pct": machine,
            "load": [round(load0, 1), round(load1, 1)]}  # fmt: skip


def print_table(rounds: list[dict], mode: str) -> None:
    base = next((r for r in rounds if r["count"] == 1), None)
    b = base["sessions"][0] if base and "fps" in base["sessions"][0] else None
    print(f"\n{mode}, libx264, Xvfb; {os.cpu_count()} CPUs")
    print("| sessions | fps per session | g2g p50 / p99 ms | CPU per session process "
          "| machine busy | load (1 min, start -> end of the window) |")  # fmt: skip
    print("|---|---|---|---|---|---|")
    for r in rounds:
        ok = [s for s in r["sessions"] if "fps" in s]
        fps = ", ".join(f"{s['fps']:.1f}" for s in ok)
        g2g = ", ".join(f"{s['g2g_p50']} / {s['g2g_p99']}" for s in ok)
        if b and r is not base and ok:
            fps += f" ({min(s['fps'] for s in ok) / b['fps']:.2f}x)"
            if b["g2g_p50"] and all(s["g2g_p50"] for s in ok):
                worst = max(s["g2g_p50"] for s in ok)
                g2g += f" ({worst / b['g2g_p50']:.2f}x p50)"
        label = f"{r['count']}" + (" (baseline)" if r is base else "")
        cpu = ", ".join(f"{c} %" for c in r["cpu_per_session_pct"])
        load = " -> ".join(str(v) for v in r["load"])
        print(f"| {label} | {fps} | {g2g} | {cpu} | {r['machine_busy_pct']} % | {load} |")
    print("\nCPU ms per frame in each session process, by stage of the video loop (process CPU, "
          "the whole stream), and each client's own CPU per frame it decoded:")  # fmt: skip
    stages = ("capture", "convert", "encode", "packetize_fec", "encrypt", "send")
    print(f"| sessions | session | {' | '.join(stages)} | host total | client (bench) "
          "| wall ms per frame | late restarts |")  # fmt: skip
    print("|---|---|" + "---|" * (len(stages) + 4))
    for r in rounds:
        for i, sess in enumerate(s for s in r["sessions"] if "fps" in s):
            st = sess.get("stages_ms") or {}
            cells = " | ".join(f"{st[k]:.2f}" if k in st else "-" for k in stages)
            total = sum(st.get(k, 0) for k in stages)
            walls = ", ".join(f"{k[5:]} {v:.1f}" for k, v in st.items() if k.startswith("wall "))
            restarts = st.get("restarts", "-")
            print(f"| {r['count']} | {i} | {cells} | {total:.2f} | "
                  f"{sess['client_ms_per_frame']:.2f} | {walls} | {restarts} |")  # fmt: skip
    print("\nCPU per process over the window, % of one core (the clients are the bench's "
          "cost, the rest the host's; 'outside' is other jobs on the machine):")  # fmt: skip
    for r in rounds:
        parts = ", ".join(f"{k} {v}" for k, v in r["processes_pct"].items())
        print(f"- {r['count']} session(s): {parts}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--client", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--base", type=int)
    ap.add_argument("--config-dir")
    ap.add_argument("--url")
    ap.add_argument("--token")
    ap.add_argument("--cafile")
    ap.add_argument("--start-at", type=float)
    ap.add_argument("--warm", type=float, default=3.0,
                    help="seconds between every session streaming and the window")  # fmt: skip
    ap.add_argument("--mode", default="1280x720x60")
    ap.add_argument("--seconds", type=float, default=12.0)
    ap.add_argument("--counts", default="1,2,3")
    args = ap.parse_args()
    if args.client:
        client(args)
        return
    from tests.support.livehost import start_host
    from tests.support.moonlight import Moonlight, post_pin

    counts = [int(c) for c in args.counts.split(",")]
    state = Path(tempfile.mkdtemp(prefix="bench-concurrent-"))
    write_conf(state, f"ping_timeout = 3000\nmax_sessions = {max(counts)}\n")
    host = None
    rounds = []
    try:
        host = start_host(state_dir=state, wait=False)  # stopped below even if never ready
        host.wait_ready(timeout=240)  # a loaded machine takes its time
        auth = ("admin", secrets.token_hex(8))
        with host.client() as c:
            c.post("/api/password", json={"newUsername": auth[0], "newPassword": auth[1],
                                          "confirmNewPassword": auth[1]})  # fmt: skip
        clients = []
        for i in range(max(counts)):
            cfg = state / f"client{i}"
            ml = Moonlight(host, cfg)
            pin = f"{1000 + i}"
            ml.start_pairing(pin)
            post_pin(host, auth, pin, f"bench{i}")
            ml.wait_paired()
            clients.append(cfg)
        print(f"host up; {os.cpu_count()} CPUs, load {os.getloadavg()[0]:.1f}", file=sys.stderr)
        for n in counts:
            r = run_round(host, clients[:n], args)
            print(json.dumps(r), flush=True)
            rounds.append(r)
    finally:
        if host is not None:
            host.stop()
    print_table(rounds, args.mode)


if __name__ == "__main__":
    main()
