"""The readiness report of `GET /diagnostics/preflight`.

Read-only by contract: it opens nothing a session would (no display, no stream); the only
writes are a probe file in the state dir, removed at once, and the encoder cache.
"""

from __future__ import annotations

import os
import socket
import tempfile
import time

import psutil
from django.conf import settings

from access import identity
from common import redis_client
from common.ports import busy_ports
from common.statedir import state_dir
from displays import capture as cap
from displays import compositors, headless
from games import appfields
from hostconfig import store
from hostconfig.schema import key
from library import catalog, conf
from media import encoders
from media.portal.screencast import HOW_TO_CONSENT

PASS, WARN, FAIL, SKIP = "pass", "warn", "fail", "skip"


def _check(cid, label, status, detail, remediation=None) -> dict:
    out = {"id": cid, "label": label, "status": status, "detail": detail}
    if remediation:
        out["remediation"] = remediation
    return out


def config_storage() -> dict:
    path = state_dir()
    try:
        fd, name = tempfile.mkstemp(dir=path, prefix=".preflight-")
        os.close(fd)
        os.unlink(name)
    except OSError as exc:
        return _check(
            "config-storage",
            "State directory writable",
            FAIL,
            f"{path}: {exc.strerror}",
            "make the state directory writable by the host user",
        )
    return _check("config-storage", "State directory writable", PASS, str(path))


def host_config() -> dict:
    """Keys whose value breaks its rule (the default applies) and lines the reader refused
    (`store.problems()`: hand edits with a line-break or control character, unclosed lists)."""
    bad = []
    for name, raw in store.read_raw().items():
        spec = key(name)
        if spec is not None and raw != "":
            try:
                spec.parse(raw)
            except ValueError:
                bad.append(name)
    details = [str(p) for p in store.problems()]
    if bad:
        details.append(f"invalid values (defaults apply): {', '.join(sorted(bad))}")
    if details:
        return _check(
            "host-config",
            "Host config valid",
            WARN,
            "; ".join(details),
            "fix these keys in host.conf or through the config API",
        )
    return _check("host-config", "Host config valid", PASS, "every value is within its rule")


def tls() -> dict:
    if identity.tls_material_valid():
        return _check("tls", "TLS certificate and key", PASS, "valid and matching")
    return _check(
        "tls",
        "TLS certificate and key",
        FAIL,
        "missing, expired or not a pair",
        "delete tls-cert.pem and tls-key.pem; the host recreates them at start",
    )


def redis_and_worker() -> list[dict]:
    try:
        redis_client.ping()
    except Exception as exc:  # any failure is the answer
        return [
            _check("redis", "Redis reachable", FAIL, exc.__class__.__name__, "start the host"),
            _check("worker", "Task worker reachable", SKIP, "needs Redis"),
        ]
    checks = [_check("redis", "Redis reachable", PASS, "ping answered")]
    try:
        from hostmgmt.celery import app  # the wiring's Celery app, reached lazily

        replies = app.control.ping(timeout=1.0)
    except Exception as exc:
        replies, err = [], exc.__class__.__name__
    else:
        err = "no worker answered within 1 s"
    if replies:
        checks.append(_check("worker", "Task worker reachable", PASS, f"{len(replies)} answered"))
    else:
        checks.append(_check("worker", "Task worker reachable", FAIL, err, "start the host"))
    return checks


def encoder() -> dict:
    refused = encoders.pin_problem(store.get("encoder"))
    if refused:  # sessions refuse to stream rather than encode in software
        return _check(
            "encoder", "Video encoder opens", FAIL, refused, "set encoder = auto or software"
        )
    backend = encoders.resolve_backend(store.get("encoder"))
    if backend is None:
        return _check(
            "encoder",
            "Video encoder opens",
            FAIL,
            "no encoder opened",
            "install a PyAV build with libx264",
        )
    codecs = ", ".join(encoders.codecs(store.get("encoder")))
    status = PASS if backend != "software" else WARN
    return _check(
        "encoder",
        "Video encoder opens",
        status,
        f"{backend}: {codecs}",
        None if status == PASS else "no hardware encoder; software encoding is used",
    )


def capture() -> list[dict]:
    """The capture check (`capture_check`), the headless compositor, the headless backends."""
    check, sel = capture_check()
    found = compositors.headless(sel.gnome_why)  # GNOME as the selection found it
    heads = [h["id"] for h in found if h["available"] and h["id"] != "auto"]
    return [
        check,
        _headless_check(sel),
        _check(
            "compositor",
            "Headless backend available",
            PASS if heads else WARN,
            ", ".join(heads) or "none",
            None if heads else "install sway (headless mode) or xvfb (the fallback display)",
        ),
    ]


def capture_check() -> tuple[dict, object]:
    """(check, selection): which capture backend a session opened now would use and why, why
    the others are not usable, and the portal's consent. `fail` when the configured backend
    cannot be used (sessions refuse to start); `warn` while a portal session would wait for
    the person at the desktop."""
    sel = cap.select()
    others = "; ".join(f"{k}: {v}" for k, v in sel.unusable.items() if k != sel.backend)
    if sel.error:
        check = _check(
            "capture-backends",
            "Capture backend usable",
            FAIL,
            f"{sel.error}. Not usable: {others}" if others else sel.error,
            "fix the capture setting (capture / capture_method, output_name), or set it to "
            "auto or xvfb",
        )
    else:
        where = f" on {sel.x_display}" if sel.x_display else ""
        detail = f"using {sel.backend}{where}: {sel.reason}"
        status, fix, consent = PASS, None, None
        if sel.backend == "portal":
            # Usable, but a session waits for the person at the desktop until consent is kept.
            consent = cap.portal_consent()
            detail += f"; portal consent: {consent['detail']}"
            if not consent["kept"]:
                status, fix = WARN, HOW_TO_CONSENT
        check = _check(
            "capture-backends",
            "Capture backend usable",
            status,
            f"{detail}. Not usable: {others}" if others else detail,
            fix,
        )
        if consent is not None:
            check["consent"] = consent
    check["backend"] = sel.backend or None
    check["requested"] = sel.requested
    check["unusable"] = dict(sel.unusable)
    return check, sel


def capture_summary() -> dict:
    """For the console's dashboard: the capture check without the list of unusable
    backends (`/diagnostics/preflight` has it), and its remediation."""
    check, _ = capture_check()
    summary = check["detail"].split(". Not usable: ", 1)[0]
    return {"status": check["status"], "summary": summary,
            "remediation": check.get("remediation")}  # fmt: skip


def _headless_check(sel) -> dict:
    """The host's headless compositor: which one headless_mode would run (as which user),
    whether it runs now and its live outputs; `fail` when headless_mode is on and it cannot."""
    st = headless.status(sel.gnome_why)
    on = bool(store.get("headless_mode"))
    if st["backend"] == "mutter":
        detail = f"each session gets a virtual monitor of the GNOME desktop " \
                 f"({st['monitors_kept']} kept now): {st['reason']}"  # fmt: skip
    elif st["running"]:
        names = ", ".join(o["name"] for o in st["outputs"]) or "no session output"
        detail = f"{st['backend']} runs (pid {st.get('pid')}, {st.get('wayland_display')}): {names}"
    elif st["backend"] is None or st.get("error"):
        detail = st.get("error") or st["reason"]
    else:
        who = f" as {st['user']}" if st.get("user") else ""
        detail = f"{st['backend']} starts{who} with the first headless session ({st['reason']})"
    usable = st["backend"] is not None and not st.get("error")
    status = PASS if usable else (FAIL if on else WARN)
    check = _check(
        "headless-compositor",
        "Headless compositor",
        status,
        ("headless_mode = true: " if on else "headless_mode = false: ") + detail,
        None if usable else "install sway; as root, set HOST_COMPOSITOR_USER",
    )
    check["headless"] = st
    return check


def _our_pids() -> set[int]:
    root = os.environ.get("HOST_SUPERVISOR_PID", "")
    try:
        proc = psutil.Process(int(root) if root.isdigit() else os.getpid())
        return {proc.pid, *(c.pid for c in proc.children(recursive=True))}
    except psutil.Error:
        return {os.getpid()}


def ports() -> dict:
    ports_ = settings.PORTS
    bind = settings.HOST_BIND
    busy = busy_ports(bind, ports_)
    if not busy:
        return _check("ports", "Ports free or ours", PASS, "every port is free")
    ours = _our_pids()
    try:
        # Only listening TCP and bound UDP sockets own a port; a closed connection in TIME_WAIT
        # shares the local port but has no pid and must not count as a foreign holder.
        owners = {
            (c.laddr.port, c.type): c.pid
            for c in psutil.net_connections("inet")
            if c.laddr and c.pid and (c.type == socket.SOCK_DGRAM or c.status == psutil.CONN_LISTEN)
        }
    except psutil.Error:
        owners = {}
    foreign = [n for n, k in busy if owners.get((n, k)) not in ours]
    if foreign:
        return _check(
            "ports",
            "Ports free or ours",
            FAIL,
            f"held by another process: {', '.join(map(str, sorted(set(foreign))))}",
            "stop the other program or set HOST_PORT to another base port",
        )
    return _check(
        "ports", "Ports free or ours", PASS, f"{len(busy)} in use by this host, the rest free"
    )


def compat_broadcast() -> dict:
    on = bool(store.get("compat_enabled"))
    return _check(
        "compat-broadcast",
        "Compatibility-plane broadcast",
        PASS,
        "on (mDNS announces the host)" if on else "off",
    )


def app_catalog() -> dict:
    """apps.json entries whose run fields this host cannot honour as written (a hand edit;
    both APIs refuse them): `elevated` (they run with the host's own rights) and an `output`
    file the host cannot append to (their launch fails). A broken file is a warning too (the
    compat plane serves an empty catalog; native Desktop still streams)."""
    label = "App catalog (apps.json)"
    if not conf.apps_file().exists():  # reading would create it: this report writes nothing
        return _check("app-catalog", label, PASS, "no apps.json yet (created on first use)")
    try:
        apps = catalog.build_apps(catalog.load_document())
    except catalog.CatalogBroken as exc:
        return _check("app-catalog", label, WARN, str(exc), "fix apps.json by hand")
    problems = []
    for app in apps:
        for name in appfields.elevated_fields(app.raw):
            problems.append(f"{app.name!r}: {name}: {appfields.ELEVATED_REASON}")
        if app.output:
            try:
                appfields.check_output_path(app.output)
            except ValueError as exc:
                problems.append(f"{app.name!r}: {exc} (its launch fails)")
    if problems:
        return _check("app-catalog", label, WARN, "; ".join(problems),
                      "edit these entries (POST /api/apps refuses them)")  # fmt: skip
    return _check("app-catalog", label, PASS, f"{len(apps)} entries")


def report() -> dict:
    checks = [
        config_storage(),
        host_config(),
        tls(),
        *redis_and_worker(),
        encoder(),
        *capture(),
        ports(),
        compat_broadcast(),
        app_catalog(),
    ]
    return {
        "schema": 1,
        "generated_unix_ms": int(time.time() * 1000),
        "ready": all(c["status"] != FAIL for c in checks),
        "checks": checks,
    }
