"""The runner's on/off switch as the API shows it (RuntimeView, §1.12)."""

from __future__ import annotations

from hooks import events
from hooks.event_kinds import STORE_CHANGED
from plugins import runner_control

UNIT = "hostmgmt plugin runner (a child of the host's supervisor)"


def view() -> dict:
    """RuntimeView; `confinement` ("confined (bubblewrap)" or "not confined: <why>") and
    `refused` (why the runner runs no plugin) once the runner has reported."""
    enabled = runner_control.runtime_enabled()
    plugins = runner_control.status()
    running = enabled and runner_control.runner_alive()
    out = {"installed": True, "enabled": enabled, "running": running, "unit": UNIT}
    state = runner_control.runner_state() if running else {}
    if state.get("confinement"):
        out["confined"] = bool(state.get("confined"))
        out["confinement"] = str(state["confinement"])
    if enabled and not running:
        out["detail"] = "switched on; the runner has not reported yet"
    elif running and state.get("refused"):
        out["refused"] = str(state["refused"])
        out["detail"] = f"no plugin runs: {state['refused']}"
    elif running:
        live = sum(1 for p in plugins.values() if p.get("running"))
        out["detail"] = f"{live} of {len(plugins)} plugin(s) running"
    return out


def switch(enabled: bool) -> dict:
    """Persist the switch (the runner follows it within a second); `store.changed` when it
    changed."""
    if runner_control.set_runtime_enabled(enabled):
        events.emit(STORE_CHANGED, {})
    return view()
