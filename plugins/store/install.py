"""What an install or uninstall job does, step by step (run by the Celery task).

Install: download the wheel (bounded) -> its sha256 must equal the catalog's -> `check_wheel`:
its metadata must name the entry's package and version, declare exactly one entry point in
`hostmgmt.plugins`, named the entry's plugin id, no dependencies (`--no-deps --no-index`: a plugin
vendors what it needs, so nothing but the pinned, hashed bytes ever reaches the environment) and
no start-up hook; the id must not be held by another installed distribution -> the package's
previous files are removed and the host's pip installs the wheel with `--prefix` into the plugin
environment -> the runner rescans -> health check (the plugin runs in the runner, when the runner
is on) -> provenance and the kept wheel are recorded. A failure before that leaves the
environment untouched; a failed install or health check reinstalls the previous version's kept
wheel (or removes a first install), so nothing is left half-installed.

Nothing here starts the plugin environment's interpreter (plugins/env.py says why): pip runs on
the host's Python with an environment without secrets or host settings (`env.child_env`), and
uninstall follows the distribution's RECORD (`env.remove_dist`).
"""

from __future__ import annotations

import hashlib
import re
import subprocess
import sys
import tempfile
import time
import zipfile
from email.parser import Parser
from importlib.metadata import PathDistribution
from pathlib import Path

from hooks import event_kinds, events
from plugins import env, runner_control
from plugins.store import conf, jobs, netfetch, provenance
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


def _pip_install(job: Job, deadline: Deadline, wheel: Path) -> None:
    """The host's pip installs `wheel` into the plugin environment without starting its
    interpreter: `--prefix` (the venv's own layout), `--ignore-installed` (the host's venv is
    never looked at or changed), `--isolated` (no pip config or PIP_* variable can add a
    source), and an environment without the host's secrets or settings."""
    env.ensure_env()
    argv = [sys.executable, "-m", "pip", "--isolated", "--disable-pip-version-check",
            "--no-input", "install", "--prefix", str(env.env_dir()), "--ignore-installed",
            "--no-index", "--no-deps", "--no-warn-script-location", str(wheel)]  # fmt: skip
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=deadline.left(),
                              env=env.child_env(), cwd=str(conf.store_dir()))  # fmt: skip
    except subprocess.TimeoutExpired:
        raise JobFailed("pip install timed out") from None
    job.log(done.stdout)
    job.log(done.stderr)
    if done.returncode != 0:
        raise JobFailed(f"pip install failed with exit status {done.returncode}")


def _remove(job: Job, pkg: str) -> None:
    for name in env.remove_dist(pkg):
        job.log(f"removed {name} and the files its RECORD lists")


def _put(job: Job, deadline: Deadline, pkg: str, wheel: Path) -> None:
    """Replace whatever of `pkg` is installed by `wheel`."""
    _remove(job, pkg)
    _pip_install(job, deadline, wheel)


# Where a wheel's files may land: site-packages only (the wheel's root, .data/purelib and
# .data/platlib). Scripts, headers and data files land next to the interpreter or elsewhere in
# the environment, and console/GUI scripts write wrappers into its bin/.
_STARTUP_MODULE = re.compile(r"(sitecustomize|usercustomize)([./]|$)", re.IGNORECASE)
_SCRIPT_GROUPS = ("console_scripts", "gui_scripts")


def _startup_hook(name: str) -> str | None:
    """Why this wheel member is refused, or None. Refused: a `.pth` file anywhere (one in
    site-packages runs at every start of the environment's interpreter), a top-level
    `sitecustomize`/`usercustomize` module (imported at start-up too), a `.data/` folder other
    than purelib/platlib, and a path that is absolute or climbs out (`..`)."""
    if name.startswith("/") or "\\" in name or ".." in name.split("/"):
        return f"{name!r} is not a relative path inside the wheel"
    if name.lower().endswith(".pth"):
        return f"{name!r} is a .pth file (run at the interpreter's start-up)"
    rel = name
    first, _, rest = name.partition("/")
    if first.endswith(".data"):
        kind, _, rel = rest.partition("/")
        if kind not in ("purelib", "platlib") or not rel:
            return f"{name!r} installs outside site-packages (.data/{kind})"
    if _STARTUP_MODULE.match(rel):
        return f"{name!r} is a start-up module (imported at the interpreter's start-up)"
    return None


def _entry_points(archive: zipfile.ZipFile, dist_info: str) -> list[tuple[str, str]]:
    """[(group, name)] of the wheel's entry_points.txt, read by importlib.metadata: the parser
    the listing and the launcher use, so all three see the same declarations."""
    dist = PathDistribution(zipfile.Path(archive, dist_info + "/"))
    return [(ep.group, ep.name) for ep in dist.entry_points]


def check_wheel(path: Path, plan: dict) -> None:
    """The wheel's own metadata agrees with the catalog entry, it declares exactly the one
    plugin entry point, and nothing in it runs at the interpreter's start-up; raises JobFailed."""
    try:
        with zipfile.ZipFile(path) as archive:
            names = archive.namelist()
            meta_name = next((n for n in names if n.count("/") == 1 and
                              n.endswith(".dist-info/METADATA")), None)  # fmt: skip
            if meta_name is None:
                raise JobFailed("the wheel has no METADATA")
            meta = Parser().parsestr(archive.read(meta_name).decode("utf-8", "replace"))
            eps = _entry_points(archive, meta_name.rsplit("/", 1)[0])
    except (zipfile.BadZipFile, OSError, ValueError) as exc:
        raise JobFailed(f"the download is not a wheel ({exc})") from None
    for name in names:
        why = _startup_hook(name)
        if why:
            raise JobFailed(f"the wheel is refused: {why}")
    if env.normalize_dist(meta.get("Name", "")) != plan["pkg"]:
        raise JobFailed(f"the wheel is {meta.get('Name')!r}, the catalog says {plan['pkg']!r}")
    if meta.get("Version") != plan["version"]:
        raise JobFailed(f"the wheel is version {meta.get('Version')}, the catalog pins "
                        f"{plan['version']}")  # fmt: skip
    if meta.get_all("Requires-Dist"):
        raise JobFailed("the wheel declares dependencies; store plugins must vendor them")
    scripts = sorted({group.strip() for group, _ in eps if group.strip() in _SCRIPT_GROUPS})
    if scripts:
        raise JobFailed(f"the wheel declares {scripts[0]} (wrappers written into the plugin "
                        f"environment's bin/); store plugins must not")  # fmt: skip
    declared = [name for group, name in eps if group == env.ENTRY_POINT_GROUP]
    if declared != [plan["id"]]:
        raise JobFailed(f"the wheel must declare exactly one {env.ENTRY_POINT_GROUP} entry point, "
                        f"named {plan['id']!r}; it declares {declared or 'none'}")  # fmt: skip


def check_id_free(plan: dict) -> None:
    """JobFailed when another installed distribution declares the plan's plugin id (it would
    run with that plugin's token, registration and UI secret)."""
    found = env.scan()
    holders = [d.pkg for d in found.conflicts.get(plan["id"], [])]
    holders += [p.pkg for p in found.plugins if p.plugin_id == plan["id"]]
    others = sorted({pkg for pkg in holders if pkg != plan["pkg"]})
    if others:
        raise JobFailed(f"plugin id {plan['id']!r} is held by {', '.join(others)}; uninstall "
                        f"it first")  # fmt: skip


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
        check_id_free(plan)
        previous = provenance.kept_wheel(plan["pkg"])
        was = env.installed_packages().get(plan["pkg"])
        job.phase("installing")
        since = time.time()
        what = "install failed"
        try:
            _put(job, deadline, plan["pkg"], wheel)
        except JobFailed as exc:
            problem = str(exc)
        else:
            what = "health check failed"
            job.phase("restarting runner")
            _rescan(job)
            job.phase("checking")
            problem = _healthy(job, plan, since, was == plan["version"], deadline)
        if problem:
            job.phase("rolling back")
            if previous is not None:
                job.log(f"reinstalling the previous version's wheel {previous.name}")
                _put(job, deadline, plan["pkg"], previous)
            else:
                if was:
                    job.log(f"no kept wheel of {plan['pkg']} {was}: removing it")
                _remove(job, plan["pkg"])
            _rescan(job)
            raise JobFailed(f"{what}, rolled back: {problem}")
        job.phase("recording")
        kept = provenance.keep_wheel(plan["pkg"], wheel)
        provenance.record(plan["pkg"], {
            "source": plan.get("source"), "entry_id": plan["id"], "plugin_id": plan["id"],
            "version": plan["version"], "title": plan.get("title", ""), "tier": plan["tier"],
            "sha256": plan["sha256"], "installed_at": int(time.time()), "wheel": kept,
        })  # fmt: skip


def uninstall(job: Job) -> None:
    pkg = job.data["plan"]["pkg"]
    job.phase("removing")
    if pkg not in env.installed_packages():
        raise JobFailed(f"{pkg} is not installed")
    _remove(job, pkg)
    job.phase("restarting runner")
    _rescan(job)
    job.phase("recording")
    provenance.forget(pkg)


def run(job_id: str) -> None:
    """The Celery task's body: run the job, record its end, release the lock."""
    job = Job.load(job_id)
    try:
        if job is None or job.data["state"] != "running":
            return
        try:
            (install if job.data["kind"] == "install" else uninstall)(job)
        except JobFailed as exc:
            job.finish(str(exc))
        except Exception as exc:  # a job ends with its reason, never silently
            job.finish(f"internal error: {type(exc).__name__}: {exc}")
        else:
            job.finish()
    finally:
        jobs.release(job_id)
        _changed()


def _changed() -> None:
    events.emit(event_kinds.STORE_CHANGED, {})
