"""What an install or uninstall job does, step by step (run by the Celery task).

Install: download the wheel (bounded) -> its sha256 must equal the catalog's -> its metadata
must name the entry's package and version, declare the entry's plugin id in
`hostmgmt.plugins` and no dependencies (`--no-deps --no-index`: a plugin vendors what it needs,
so nothing but the pinned, hashed bytes ever reaches the environment) -> pip install into the
plugin environment -> the runner rescans -> health check (the plugin runs in the runner, when
the runner is on) -> provenance and the kept wheel are recorded. A failure before pip leaves the
environment untouched; a failed health check reinstalls the previous version's kept wheel (or
removes a first install), so nothing is left half-installed.
"""

from __future__ import annotations

import hashlib
import subprocess
import sys
import tempfile
import time
import zipfile
from email.parser import Parser
from pathlib import Path

from plugins import env, runner_control
from plugins.store import conf, netfetch, provenance
from plugins.store.jobs import Job


class JobFailed(Exception):
    pass


class Deadline:
    def __init__(self, seconds: float):
        self.end = time.monotonic() + seconds

    def left(self) -> float:
        left = self.end - time.monotonic()
        if left <= 0:
            raise JobFailed(f"timed out after {conf.JOB_TIMEOUT_S} s")
        return left


def _pip(job: Job, deadline: Deadline, *args: str) -> None:
    """pip of the host's venv acting on the plugin environment; `--isolated`: no pip config or
    PIP_* variable (an extra index or find-links) can add a source to what is installed."""
    argv = [sys.executable, "-m", "pip", "--isolated", "--python", str(env.ensure_env()),
            "--disable-pip-version-check", "--no-input", *args]  # fmt: skip
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=deadline.left())
    except subprocess.TimeoutExpired:
        raise JobFailed(f"pip timed out ({' '.join(args[:1])})") from None
    job.log(done.stdout)
    job.log(done.stderr)
    if done.returncode != 0:
        raise JobFailed(f"pip {args[0]} failed with exit status {done.returncode}")


def check_wheel(path: Path, plan: dict) -> None:
    """The wheel's own metadata agrees with the catalog entry; raises JobFailed."""
    try:
        with zipfile.ZipFile(path) as archive:
            names = archive.namelist()
            meta_name = next((n for n in names if n.count("/") == 1 and
                              n.endswith(".dist-info/METADATA")), None)  # fmt: skip
            if meta_name is None:
                raise JobFailed("the wheel has no METADATA")
            meta = Parser().parsestr(archive.read(meta_name).decode("utf-8", "replace"))
            ep_name = meta_name.rsplit("/", 1)[0] + "/entry_points.txt"
            eps = archive.read(ep_name).decode("utf-8", "replace") if ep_name in names else ""
    except (zipfile.BadZipFile, OSError) as exc:
        raise JobFailed(f"the download is not a wheel ({exc})") from None
    if env.normalize_dist(meta.get("Name", "")) != plan["pkg"]:
        raise JobFailed(f"the wheel is {meta.get('Name')!r}, the catalog says {plan['pkg']!r}")
    if meta.get("Version") != plan["version"]:
        raise JobFailed(f"the wheel is version {meta.get('Version')}, the catalog pins "
                        f"{plan['version']}")  # fmt: skip
    if meta.get_all("Requires-Dist"):
        raise JobFailed("the wheel declares dependencies; store plugins must vendor them")
    group, found = None, False
    for line in eps.splitlines():
        line = line.strip()
        if line.startswith("["):
            group = line.strip("[]").strip()
        elif group == env.ENTRY_POINT_GROUP and line.split("=", 1)[0].strip() == plan["id"]:
            found = True
    if not found:
        raise JobFailed(f"the wheel declares no {env.ENTRY_POINT_GROUP} entry point "
                        f"named {plan['id']!r}")  # fmt: skip


def _download(job: Job, plan: dict, folder: Path, deadline: Deadline) -> Path:
    job.log(f"downloading {plan['wheel_url']}")
    try:
        body = netfetch.get(plan["wheel_url"], conf.WHEEL_MAX_BYTES,
                            allow_loopback=plan["allow_loopback"],
                            timeout=min(conf.FETCH_TIMEOUT_S, deadline.left()))  # fmt: skip
    except netfetch.FetchError as exc:
        raise JobFailed(f"wheel download failed: {exc}") from None
    digest = hashlib.sha256(body).hexdigest()
    if digest != plan["sha256"]:
        raise JobFailed(f"wheel sha256 {digest} differs from the catalog's {plan['sha256']}")
    job.log(f"sha256 {digest} matches the catalog ({len(body)} bytes)")
    stem = f"{plan['pkg'].replace('-', '_')}-{plan['version']}"
    path = folder / f"{stem}-py3-none-any.whl"
    path.write_bytes(body)
    return path


def _rescan(job: Job) -> None:
    runner_control.request_rescan()


def _healthy(job: Job, plan: dict, since: float, reinstall: bool, deadline: Deadline) -> str | None:
    """None when healthy (or when there is nothing to check), else why not. Healthy: the
    runner shows the plugin running at the new version, up for 3 s, started after the install
    (a reinstall of the same version need not restart it: the runner restarts a plugin only
    when its installed version changes)."""
    plugin_id, version = plan["id"], plan["version"]
    if not runner_control.runtime_enabled():
        job.log("the plugin runner is off: health check skipped (the plugin runs once it is on)")
        return None
    wait = min(conf.health_wait_s(), deadline.left())
    end, stable_for, state = time.monotonic() + wait, 3.0, {}
    while time.monotonic() < end:
        state = runner_control.status().get(plugin_id) or {}
        started = state.get("started_at") or 0
        fresh = started >= since or reinstall
        if (
            state.get("running")
            and state.get("version", version) == version
            and fresh
            and time.time() - started >= stable_for
        ):
            job.log(f"{plugin_id} runs (pid {state.get('pid')})")
            return None
        time.sleep(0.5)
    tail = " / ".join(state.get("log", [])[-3:]) if state else ""
    why = f"{plugin_id} did not stay running within {wait:.0f} s"
    if state.get("last_exit") is not None:
        why += f" (last exit status {state['last_exit']})"
    return why + (f": {tail}" if tail else "")


def install(job: Job) -> None:
    plan = job.data["plan"]
    deadline = Deadline(conf.JOB_TIMEOUT_S)
    with tempfile.TemporaryDirectory(dir=conf.store_dir(), prefix=".dl-") as tmp:
        job.phase("verifying")
        wheel = _download(job, plan, Path(tmp), deadline)
        check_wheel(wheel, plan)
        previous = provenance.kept_wheel(plan["pkg"])
        was = {p.pkg: p.version for p in env.installed()}.get(plan["pkg"])
        job.phase("installing")
        since = time.time()
        _pip(job, deadline, "install", "--no-index", "--no-deps", "--force-reinstall",
             str(wheel))  # fmt: skip
        job.phase("restarting runner")
        _rescan(job)
        job.phase("checking")
        problem = _healthy(job, plan, since, was == plan["version"], deadline)
        if problem:
            job.phase("rolling back")
            if previous is not None:
                job.log(f"reinstalling the previous version's wheel {previous.name}")
                _pip(job, deadline, "install", "--no-index", "--no-deps", "--force-reinstall",
                     str(previous))  # fmt: skip
            else:
                if was:
                    job.log(f"no kept wheel of {plan['pkg']} {was}: removing it")
                _pip(job, deadline, "uninstall", "-y", plan["pkg"])
            _rescan(job)
            raise JobFailed(f"health check failed, rolled back: {problem}")
        job.phase("recording")
        kept = provenance.keep_wheel(plan["pkg"], wheel)
        provenance.record(plan["pkg"], {
            "source": plan.get("source"), "entry_id": plan["id"], "plugin_id": plan["id"],
            "version": plan["version"], "title": plan.get("title", ""), "tier": plan["tier"],
            "sha256": plan["sha256"], "installed_at": int(time.time()), "wheel": kept,
        })  # fmt: skip


def uninstall(job: Job) -> None:
    pkg = job.data["plan"]["pkg"]
    deadline = Deadline(conf.JOB_TIMEOUT_S)
    job.phase("removing")
    if pkg not in {p.pkg for p in env.installed()}:
        raise JobFailed(f"{pkg} is not installed")
    _pip(job, deadline, "uninstall", "-y", pkg)
    job.phase("restarting runner")
    _rescan(job)
    job.phase("recording")
    provenance.forget(pkg)


def run(job_id: str) -> None:
    """The Celery task's body: run the job, record its end, release the lock."""
    from plugins.store import jobs

    job = Job.load(job_id)
    try:
        if job is None or job.data["state"] != "running":
            return
        try:
            (install if job.data["kind"] == "install" else uninstall)(job)
        except JobFailed as exc:
            job.finish(str(exc))
        except Exception as exc:  # noqa: BLE001 - a job ends with its reason, never silently
            job.finish(f"internal error: {type(exc).__name__}: {exc}")
        else:
            job.finish()
    finally:
        jobs.release(job_id)
        _changed()


def _changed() -> None:
    from hooks import event_kinds
    from hooks.events import emit

    emit(event_kinds.STORE_CHANGED, {})
