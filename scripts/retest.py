#!/usr/bin/env python3
"""Move the tests so that `tests/<app>/` mirrors the product's apps (issue 16), after
`scripts/relayout.py` moved the code, and rewrite every reference to a moved test file.

Run from the repository root on a clean tree:

    .venv/bin/python scripts/retest.py            # moves (git mv), rewrites, prints a summary
    .venv/bin/python scripts/retest.py --dry-run  # prints what it would move, changes nothing

Why a table and not rules: a test's home is what it tests, which its old folder does not say
(the old folders are the issues that wrote them: `hoststate` holds config, display and GPU
tests). HOMES names each known file's new path. A test file that HOMES does not name stays
where it is and is listed at the end; if its folder's conftest moved away, the old folder gets
a conftest that re-exports the moved fixtures, so it keeps running.

Fixtures: pytest applies a conftest to its folder and below only. A conftest moves with most
of its users (CONFTEST_MOVES); SHARED_FIXTURES adds `from <module> import <fixtures>` lines to
the conftest of each other folder whose tests use them (a fixture imported into a conftest is
registered there).

References: every moved module is rewritten by dotted name (imports, `from pkg import module`
split by new package, strings such as node ids) and by slash path (docs, Makefile, .ci/run,
pyproject, bench, config effects), and `Path(__file__)...parents[N]` in moved files is
re-anchored. It is idempotent: a second run finds nothing to move or rewrite. Only the
standard library is imported here; ruff runs as a subprocess to sort and format the imports
it rewrote.
"""

from __future__ import annotations

import argparse
import ast
import re
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path.cwd()

# -- 1. each known test file's new path (old path -> new path), by what it tests.
HOMES: dict[str, str] = {
    # compat: the GameStream protocol (RTSP, control, RTP, FEC), its nvhttp pairing handshake,
    # mDNS, the launch routes, and the loopback transport session
    "tests/compat_protocol/__init__.py": "tests/compat/__init__.py",
    "tests/compat_protocol/conftest.py": "tests/compat/conftest.py",
    "tests/compat_protocol/mcc.py": "tests/compat/mcc.py",
    "tests/compat_protocol/loopback.py": "tests/compat/loopback.py",
    "tests/compat_protocol/e2e_client.py": "tests/compat/e2e_client.py",
    "tests/compat_protocol/test_audio.py": "tests/compat/test_audio.py",
    "tests/compat_protocol/test_control.py": "tests/compat/test_control.py",
    "tests/compat_protocol/test_endpoint.py": "tests/compat/test_endpoint.py",
    "tests/compat_protocol/test_fec.py": "tests/compat/test_fec.py",
    "tests/compat_protocol/test_pacing.py": "tests/compat/test_pacing.py",
    "tests/compat_protocol/test_rtsp.py": "tests/compat/test_rtsp.py",
    "tests/compat_protocol/test_session.py": "tests/compat/test_session.py",
    "tests/compat_protocol/test_video.py": "tests/compat/test_video.py",
    "tests/pairing/test_coordinator.py": "tests/compat/test_coordinator.py",
    "tests/pairing/test_dispatch.py": "tests/compat/test_dispatch.py",
    "tests/pairing/test_handshake.py": "tests/compat/test_handshake.py",
    "tests/pairing/test_mdns.py": "tests/compat/test_mdns.py",
    "tests/streaming/test_launch_control.py": "tests/compat/test_launch_control.py",
    "tests/streaming/test_routes.py": "tests/compat/test_routes.py",
    # media: encoder, GPUs, audio chain and Opus, input injection, Wayland building blocks
    "tests/playable/__init__.py": "tests/media/__init__.py",
    "tests/playable/conftest.py": "tests/media/conftest.py",
    "tests/playable/signals.py": "tests/media/signals.py",
    "tests/playable/xserver.py": "tests/media/xserver.py",
    "tests/playable/test_capture.py": "tests/media/test_capture.py",
    "tests/playable/test_dsp.py": "tests/media/test_dsp.py",
    "tests/playable/test_gamepad.py": "tests/media/test_gamepad.py",
    "tests/playable/test_input.py": "tests/media/test_input.py",
    "tests/playable/test_input_packets.py": "tests/media/test_input_packets.py",
    "tests/playable/test_opus.py": "tests/media/test_opus.py",
    "tests/playable/test_text_input.py": "tests/media/test_text_input.py",
    "tests/compat_protocol/test_encoder.py": "tests/media/test_encoder.py",
    "tests/hoststate/test_gpu_active.py": "tests/media/test_gpu_active.py",
    "tests/hoststate/test_machine.py": "tests/media/test_machine.py",
    "tests/streaming/test_playable_e2e.py": "tests/media/test_playable_e2e.py",
    "tests/streaming/test_wayland.py": "tests/media/test_wayland.py",
    # displays: the display state machine, policy and presets, capture choice, headless mode
    "tests/hoststate/test_capture_select.py": "tests/displays/test_capture_select.py",
    "tests/hoststate/test_display_settings.py": "tests/displays/test_display_settings.py",
    "tests/hoststate/test_displays.py": "tests/displays/test_displays.py",
    "tests/hoststate/test_headless_machine.py": "tests/displays/test_headless_machine.py",
    "tests/hoststate/test_display_models_moved.py": "tests/displays/test_display_models_moved.py",
    "tests/streaming/test_attached_x11_e2e.py": "tests/displays/test_attached_x11_e2e.py",
    "tests/streaming/test_headless_e2e.py": "tests/displays/test_headless_e2e.py",
    # games: lifecycle, registry, watcher, profiles, session settings
    "tests/gamelife/__init__.py": "tests/games/__init__.py",
    "tests/gamelife/conftest.py": "tests/games/conftest.py",
    "tests/gamelife/stop_client.py": "tests/games/stop_client.py",
    "tests/gamelife/test_api.py": "tests/games/test_api.py",
    "tests/gamelife/test_compat_e2e.py": "tests/games/test_compat_e2e.py",
    "tests/gamelife/test_e2e.py": "tests/games/test_e2e.py",
    "tests/gamelife/test_lifecycle.py": "tests/games/test_lifecycle.py",
    "tests/gamelife/test_profiles.py": "tests/games/test_profiles.py",
    "tests/playable/test_game.py": "tests/games/test_game.py",
    # streaming: the session core (history, shared display backend, app environment)
    "tests/console/test_sessions.py": "tests/streaming/test_sessions.py",
    "tests/native/test_session_display.py": "tests/streaming/test_session_display.py",
    # pairing: native pairing's pending queue joins the paired-client tests
    "tests/native/test_pending.py": "tests/pairing/test_pending.py",
    # hostmgmt: platform (auth, supervisor, API edge, live host), console, config
    "tests/platform/__init__.py": "tests/hostmgmt/__init__.py",
    "tests/platform/conftest.py": "tests/hostmgmt/conftest.py",
    "tests/platform/test_api_schema.py": "tests/hostmgmt/test_api_schema.py",
    "tests/platform/test_body_limits.py": "tests/hostmgmt/test_body_limits.py",
    "tests/platform/test_body_limits_e2e.py": "tests/hostmgmt/test_body_limits_e2e.py",
    "tests/platform/test_domain_errors.py": "tests/hostmgmt/test_domain_errors.py",
    "tests/platform/test_gaps_listed.py": "tests/hostmgmt/test_gaps_listed.py",
    "tests/platform/test_live_host.py": "tests/hostmgmt/test_live_host.py",
    "tests/platform/test_redis_client.py": "tests/hostmgmt/test_redis_client.py",
    "tests/hoststate/test_e2e.py": "tests/hostmgmt/test_e2e.py",
    "tests/platform/v1_routes.py": "tests/hostmgmt/auth/v1_routes.py",
    "tests/platform/test_admin_auth.py": "tests/hostmgmt/auth/test_admin_auth.py",
    "tests/platform/test_auth_e2e.py": "tests/hostmgmt/auth/test_auth_e2e.py",
    "tests/platform/test_auth_matrix.py": "tests/hostmgmt/auth/test_auth_matrix.py",
    "tests/platform/test_mgmt_auth.py": "tests/hostmgmt/auth/test_mgmt_auth.py",
    "tests/platform/test_tokens.py": "tests/hostmgmt/auth/test_tokens.py",
    "tests/platform/test_welcome_page.py": "tests/hostmgmt/auth/test_welcome_page.py",
    "tests/platform/test_periodic.py": "tests/hostmgmt/supervisor/test_periodic.py",
    "tests/platform/test_supervisor_shutdown.py": "tests/hostmgmt/supervisor/test_supervisor_shutdown.py",  # noqa: E501
    "tests/platform/test_user_unit.py": "tests/hostmgmt/supervisor/test_user_unit.py",
    "tests/console/__init__.py": "tests/hostmgmt/console/__init__.py",
    "tests/console/conftest.py": "tests/hostmgmt/console/conftest.py",
    "tests/console/test_browser.py": "tests/hostmgmt/console/test_browser.py",
    "tests/console/test_live_api.py": "tests/hostmgmt/console/test_live_api.py",
    "tests/console/test_logs.py": "tests/hostmgmt/console/test_logs.py",
    "tests/console/test_pages.py": "tests/hostmgmt/console/test_pages.py",
    "tests/console/test_telemetry_stats.py": "tests/hostmgmt/console/test_telemetry_stats.py",
    "tests/console/test_tokens_api.py": "tests/hostmgmt/console/test_tokens_api.py",
    "tests/console/test_updater_platform.py": "tests/hostmgmt/console/test_updater_platform.py",
    "tests/hoststate/__init__.py": "tests/hostmgmt/config/__init__.py",
    "tests/hoststate/test_config.py": "tests/hostmgmt/config/test_config.py",
    "tests/hoststate/test_config_lines.py": "tests/hostmgmt/config/test_config_lines.py",
    "tests/hoststate/test_e2e_config_injection.py": "tests/hostmgmt/config/test_e2e_config_injection.py",  # noqa: E501
    "tests/hoststate/test_key_effects.py": "tests/hostmgmt/config/test_key_effects.py",
    "tests/hoststate/test_key_guard.py": "tests/hostmgmt/config/test_key_guard.py",
    # shared support: used by tests of several apps (or by bench/), in one package
    "tests/livehost.py": "tests/support/livehost.py",
    "tests/browser.py": "tests/support/browser.py",
    "tests/events.py": "tests/support/events.py",
    "tests/hoststate/conftest.py": "tests/support/state_api.py",
    "tests/pairing/certs.py": "tests/support/certs.py",
    "tests/pairing/live.py": "tests/support/moonlight.py",
    "tests/streaming/client.py": "tests/support/client.py",
    "tests/streaming/play_client.py": "tests/support/play_client.py",
    "tests/streaming/attached_client.py": "tests/support/attached_client.py",
    "tests/streaming/desktop.py": "tests/support/desktop.py",
    "tests/streaming/x11_app.py": "tests/support/x11_app.py",
    "tests/streaming/wl_app.py": "tests/support/wl_app.py",
    "tests/streaming/tone_app.py": "tests/support/tone_app.py",
}
# Files that stay where they are on purpose (so they are not listed as unknown): the root
# conftest and settings, and the apps whose folder already has the app's name.
STAY_FOLDERS = (
    "tests/hooks/",
    "tests/library/",
    "tests/native/",
    "tests/pairing/",
    "tests/streaming/",
)
STAY_FILES = ("tests/__init__.py", "tests/conftest.py", "tests/settings.py")

# Packages the moved tests import (`tests.<app>` is a package: the tests import by full name).
PACKAGES = [
    "tests/support",
    "tests/compat",
    "tests/media",
    "tests/displays",
    "tests/games",
    "tests/hostmgmt",
    "tests/hostmgmt/auth",
    "tests/hostmgmt/config",
    "tests/hostmgmt/console",
    "tests/hostmgmt/supervisor",
]

# -- 2. fixtures a folder's tests use from a conftest that lives elsewhere after the moves:
# conftest -> [(module, [fixture names] or ["*"] for every fixture the module defines)].
# After the moves, every test file's fixtures are checked against the conftests above it.
SHARED_FIXTURES: dict[str, list[tuple[str, list[str]]]] = {
    # the in-process state dir and API clients (was tests/hoststate/conftest.py)
    "tests/displays/conftest.py": [("tests.support.state_api", ["*"])],
    "tests/media/conftest.py": [("tests.support.state_api", ["*"])],
    "tests/hostmgmt/config/conftest.py": [("tests.support.state_api", ["*"])],
    # the compat session host of a test module (/launch, /resume, /cancel)
    "tests/compat/conftest.py": [("tests.streaming.conftest", ["stream_host"])],
    # session history's admin headers (console fixture)
    "tests/streaming/conftest.py": [("tests.hostmgmt.console.conftest", ["admin"])],
}
# Old folders named as a whole (`pytest tests/gamelife`) whose tests went to one app; the
# others (`tests/hoststate`, split three ways) are listed at the end for a person to word.
FOLDERS: dict[str, str] = {
    "tests/compat_protocol": "tests/compat",
    "tests/console": "tests/hostmgmt/console",
    "tests/gamelife": "tests/games",
    "tests/platform": "tests/hostmgmt",
    "tests/playable": "tests/media",
}
CONFTEST_DOC = '"""Fixtures of this folder\'s tests that live with the tests of another app."""\n'


def say(text: str) -> None:
    sys.stdout.write(f"retest: {text}\n")


def git(*args: str, check: bool = True) -> str:
    out = subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True)
    if check and out.returncode != 0:
        sys.exit(f"retest: git {' '.join(args)} failed: {out.stderr.strip()}")
    return out.stdout


def dotted(path: str) -> str:
    return path.removesuffix(".py").removesuffix("/__init__").replace("/", ".")


# -- moves ---------------------------------------------------------------------------------


def plan_moves() -> list[tuple[str, str]]:
    """The (old, new) moves still to do; a file already at its new path is done."""
    todo = []
    for old, new in HOMES.items():
        if not (ROOT / old).exists():
            continue
        if not (ROOT / new).exists():
            todo.append((old, new))
        elif old.endswith("__init__.py") or (
            old.endswith("conftest.py") and (ROOT / old).read_text().startswith(CONFTEST_DOC)
        ):
            continue  # an old folder kept for tests HOMES does not know: written by a run
        else:
            sys.exit(f"retest: both {old} and {new} exist; resolve by hand")
    return todo


def unknown_tests() -> list[str]:
    """Python files under tests/ that HOMES does not place and that are not meant to stay."""
    made = set(HOMES.values()) | set(SHARED_FIXTURES) | {f"{p}/__init__.py" for p in PACKAGES}
    out = []
    for line in git("ls-files", "tests").splitlines():
        if line in HOMES or line in made or line in STAY_FILES or line.startswith(STAY_FOLDERS):
            continue
        if line.endswith(".py") and (ROOT / line).exists():
            out.append(line)
    return out


# -- reference rewriting -------------------------------------------------------------------

PATH_FILES = (".py", ".md", ".toml", ".cfg", ".ini", ".txt", ".sh", ".yml", ".yaml")


def text_files() -> list[Path]:
    out = []
    for line in git("ls-files").splitlines():
        p = ROOT / line
        if not p.is_file() or line in ("scripts/retest.py", "scripts/relayout.py"):
            continue
        if line.endswith(PATH_FILES) or p.name in ("Makefile", "run") or line.startswith(".ci/"):
            out.append(p)
    return out


def module_map() -> dict[str, str]:
    """Old dotted module -> new dotted module, for every moved module (packages excluded:
    an old folder's tests go to several apps, so `tests.hoststate` alone has no one home)."""
    return {
        dotted(o): dotted(n)
        for o, n in HOMES.items()
        if o.endswith(".py") and not o.endswith("__init__.py")
    }


def rewrite_import_froms(src: str, mods: dict[str, str]) -> str:
    """`from tests.a import b` where b is a moved module, or `from tests.a.b import x` where
    tests.a.b moved: one statement per new package, aliases and order kept."""
    try:
        tree = ast.parse(src)
    except SyntaxError:
        return src
    lines = src.splitlines(keepends=True)
    edits = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.ImportFrom) or not (node.module or "").startswith("tests"):
            continue
        if node.level:
            continue
        groups: dict[str, list[str]] = {}
        changed = False
        for a in node.names:
            full = f"{node.module}.{a.name}"
            if full in mods:
                pkg, _, name = mods[full].rpartition(".")
                changed = True
                alias = a.asname or (a.name if name != a.name else None)
            else:
                pkg, name, alias = mods.get(node.module, node.module), a.name, a.asname
                changed |= node.module in mods
            groups.setdefault(pkg, []).append(f"{name} as {alias}" if alias else name)
        if not changed:
            continue
        indent = lines[node.lineno - 1][: node.col_offset]
        stmts = [f"from {pkg} import {', '.join(names)}" for pkg, names in groups.items()]
        edits.append((node, ("\n" + indent).join(stmts)))
    for node, text in sorted(edits, key=lambda e: (e[0].lineno, e[0].col_offset), reverse=True):
        start = sum(len(x) for x in lines[: node.lineno - 1]) + node.col_offset
        end = sum(len(x) for x in lines[: node.end_lineno - 1]) + node.end_col_offset
        src = src[:start] + text + src[end:]
        lines = src.splitlines(keepends=True)
    return src


def rewrite_names(src: str, mods: dict[str, str]) -> str:
    """Dotted names (`tests.hoststate.test_machine`) and paths (`tests/hoststate/x.py`,
    node ids included) anywhere in the text."""
    for old in sorted(mods, key=len, reverse=True):
        new = mods[old]
        src = re.sub(rf"(?<![\w.]){re.escape(old)}(?![\w])", new, src)
        op, np_ = old.replace(".", "/") + ".py", new.replace(".", "/") + ".py"
        src = re.sub(rf"(?<![\w/]){re.escape(op)}(?![\w])", np_, src)
        # os.path.join("tests", "a", "b.py")
        parts = [re.escape(f'"{x}"') for x in op.split("/")]
        joined = ", ".join(f'"{x}"' for x in np_.split("/"))
        src = re.sub(r",\s*".join(parts), joined, src)
    for old, new in FOLDERS.items():
        src = re.sub(rf"(?<![\w/]){re.escape(old)}(?!/?[\w.])", new, src)
    return src


PARENT_RE = re.compile(r"Path\(__file__\)\.resolve\(\)(?:\.parents\[(\d+)\]|((?:\.parent(?!s))+))")


def reanchor(src: str, old: str, new: str) -> str:
    """`Path(__file__).resolve().parents[N]` (or `.parent.parent`) named an ancestor of the
    old path; name the same folder from the new path."""

    def fix(m: re.Match) -> str:
        n = int(m.group(1)) if m.group(1) is not None else m.group(2).count(".parent") - 1
        anchor = Path(old).parents[n]
        new_parents = list(Path(new).parents)
        if anchor not in new_parents:
            return m.group(0)  # a folder that moved too: left as is, listed by the caller
        k = new_parents.index(anchor)
        if k == n:
            return m.group(0)
        return f"Path(__file__).resolve().parents[{k}]"

    return PARENT_RE.sub(fix, src)


def write_shared_fixtures(conftest: str, imports: list[tuple[str, list[str]]]) -> bool:
    """Import the fixtures into the conftest (once: names it already imports are skipped)."""
    p = ROOT / conftest
    src = p.read_text() if p.exists() else CONFTEST_DOC + "\nfrom __future__ import annotations\n"
    added = False
    for module, names in imports:
        if names == ["*"]:
            names = fixtures_of(ROOT / (module.replace(".", "/") + ".py"))
        tree = ast.parse(src)
        have = {
            a.asname or a.name
            for n in tree.body
            if isinstance(n, ast.ImportFrom) and n.module == module
            for a in n.names
        }
        missing = sorted(set(names) - have)
        if not missing:
            continue
        line = f"from {module} import {', '.join(missing)}  # noqa: F401 - fixtures"
        # after the last top-level import (ruff sorts the block afterwards)
        last = max(n.end_lineno for n in tree.body if isinstance(n, ast.Import | ast.ImportFrom))
        lines = src.splitlines(keepends=True)
        lines.insert(last, line + "\n")
        src = "".join(lines)
        added = True
    if added:
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(src)
    return added


def fixtures_of(path: Path) -> list[str]:
    tree = ast.parse(path.read_text())
    return [
        n.name
        for n in tree.body
        if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)
        and any("fixture" in ast.unparse(d) for d in n.decorator_list)
    ]


DOC = "docs/architecture.md"
DOC_SECTION = """## Tests
`tests/<app>/` mirrors the apps (`tests/compat`, `tests/native`, `tests/displays`, `tests/games`,
`tests/media`, `tests/streaming` for the session core, `tests/hooks`, `tests/library`,
`tests/pairing`, and `tests/hostmgmt/{auth,config,console,supervisor}`): a behaviour's tests sit
beside its name. Helpers several apps use (the live host, the Moonlight client, test apps,
certificates, the in-process state dir) are in `tests/support/`; a fixture another app's tests
need is imported into that folder's `conftest.py`. Moved by `scripts/retest.py` (a table).

"""


def write_doc_section() -> bool:
    p = ROOT / DOC
    if not p.exists():
        return False
    text = p.read_text()
    if DOC_SECTION.splitlines()[0] in text.splitlines():
        return False
    anchor = "## Request bodies"
    at = text.find("\n" + anchor)
    text = text[: at + 1] + DOC_SECTION + text[at + 1 :] if at >= 0 else text + "\n" + DOC_SECTION
    p.write_text(text)
    return True


def unreachable_fixtures() -> list[str]:
    """Fixtures a test file asks for that a project conftest or support module defines but no
    conftest above the file (nor the file itself) provides: pytest would fail at setup."""
    files = [ROOT / f for f in git("ls-files", "tests").splitlines() if f.endswith(".py")]
    files = [f for f in files if f.exists()]
    project = set()
    for f in files:
        if f.name == "conftest.py" or f.parent.name == "support":
            project |= set(fixtures_of(f))
    provided: dict[Path, set[str]] = {}
    for f in files:
        if f.name == "conftest.py":
            tree = ast.parse(f.read_text())
            names = set(fixtures_of(f))
            for n in tree.body:  # fixtures imported into the conftest
                if isinstance(n, ast.ImportFrom):
                    names |= {a.asname or a.name for a in n.names}
            provided[f.parent] = names
    out = []
    for f in files:
        if not f.name.startswith("test_"):
            continue
        tree = ast.parse(f.read_text())
        asked = set()
        own = set(fixtures_of(f))
        for n in ast.walk(tree):
            if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef) and (
                n.name.startswith("test_") or n.name in own
            ):
                asked |= {a.arg for a in n.args.args}
            if isinstance(n, ast.Call) and "usefixtures" in ast.unparse(n.func):
                asked |= {a.value for a in n.args if isinstance(a, ast.Constant)}
        reach = set(own)
        for d in [f.parent, *f.parent.parents]:
            reach |= provided.get(d, set())
        for name in sorted((asked & project) - reach):
            out.append(f"{f.relative_to(ROOT)} asks for fixture `{name}`, no conftest above it")
    return out


# -- main ----------------------------------------------------------------------------------


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dry-run", action="store_true", help="print the moves, change nothing")
    args = ap.parse_args()
    if not (ROOT / "tests").is_dir() or not (ROOT / ".git").exists():
        sys.exit("retest: run from the repository root")

    moves = plan_moves()
    if args.dry_run:
        for o, n in moves:
            say(f"would move {o} -> {n}")
        for f in unknown_tests():
            say(f"not in HOMES, stays: {f}")
        for line in unreachable_fixtures():
            say(f"FIXTURE: {line}")
        return 0
    if git("status", "--porcelain").strip():
        sys.exit("retest: the tree has uncommitted changes; commit them first")

    for o, n in moves:
        (ROOT / n).parent.mkdir(parents=True, exist_ok=True)
        git("mv", o, n)
        say(f"moved {o} -> {n}")
    for pkg in PACKAGES:
        init = ROOT / pkg / "__init__.py"
        if not init.exists():
            init.parent.mkdir(parents=True, exist_ok=True)
            init.write_text("")
            git("add", str(init.relative_to(ROOT)))
            say(f"created {pkg}/__init__.py")

    # An old folder that still holds tests HOMES does not know keeps its package and gets the
    # fixtures of the conftest that moved away; an empty one loses its __init__.py.
    made: list[str] = list(SHARED_FIXTURES)  # conftests this run writes (sorted by ruff below)
    moved_conftests = {
        str(Path(o).parent): n for o, n in HOMES.items() if o.endswith("/conftest.py")
    }
    leftover = unknown_tests()
    for folder, new_conf in moved_conftests.items():
        left = [f for f in leftover if f.startswith(folder + "/")]
        init = ROOT / folder / "__init__.py"
        if left:
            if not init.exists():
                init.write_text("")
                git("add", str(init.relative_to(ROOT)))
            names = fixtures_of(ROOT / new_conf)
            here = f"{folder}/conftest.py"
            if names and write_shared_fixtures(here, [(dotted(new_conf), names)]):
                made.append(here)
                say(f"{here} re-exports the fixtures of {new_conf}")
    for folder in {str(Path(o).parent) for o in HOMES}:
        d = ROOT / folder
        tracked = git("ls-files", folder).split()
        if d.is_dir() and tracked == [f"{folder}/__init__.py"]:
            git("rm", "-q", f"{folder}/__init__.py")
            say(f"removed the emptied {folder}/")

    for conftest, imports in SHARED_FIXTURES.items():
        if write_shared_fixtures(conftest, imports):
            git("add", conftest)
            say(f"{conftest} imports shared fixtures")

    if write_doc_section():
        git("add", DOC)
        say(f"{DOC}: added the Tests section")

    mods = module_map()
    changed = []
    for p in text_files():
        try:
            src = p.read_text()
        except UnicodeDecodeError:
            continue
        new = rewrite_import_froms(src, mods) if p.suffix == ".py" else src
        new = rewrite_names(new, mods)
        rel = str(p.relative_to(ROOT))
        old_path = {n: o for o, n in moves}.get(rel)  # moved by this run only
        if old_path:
            new = reanchor(new, old_path, rel)
        if new != src:
            p.write_text(new)
            changed.append(rel)
    say(f"rewrote references in {len(changed)} files")

    py = [f for f in changed if f.endswith(".py")] + made
    py = sorted({f for f in py if (ROOT / f).exists()})
    if py:
        ruff = [sys.executable, "-m", "ruff"]
        subprocess.run([*ruff, "check", "-q", "--fix", "--select", "I", *py], cwd=ROOT)
        subprocess.run([*ruff, "format", "-q", *py], cwd=ROOT)
    git("add", "-A", "tests", *[f for f in changed if not f.startswith("tests/")])

    # What a person must look at: unknown tests, fixtures out of reach, old folder names.
    for line in unreachable_fixtures():
        say(f"FIXTURE: {line}")
    for f in unknown_tests():
        say(f"not in HOMES, stays: {f}")
    old_folders = sorted({str(Path(o).parent) for o in HOMES if str(Path(o).parent) != "tests"})
    gone = [f for f in old_folders if not git("ls-files", f).strip()]
    for f in gone:  # only caches are left in an emptied folder
        for cache in (ROOT / f).glob("__pycache__"):
            shutil.rmtree(cache)
        if (ROOT / f).is_dir() and not any((ROOT / f).iterdir()):
            (ROOT / f).rmdir()
    for p in text_files():
        for i, line in enumerate(p.read_text(errors="replace").splitlines(), 1):
            for f in gone:
                base = f.rpartition("/")[2]
                if (
                    re.search(rf"(?<![\w/]){re.escape(f)}(?![\w])", line)
                    or re.search(rf"(?<![\w.]){re.escape(f.replace('/', '.'))}(?![\w])", line)
                    or re.search(rf"[\"']tests[\"'],\s*[\"']{base}[\"']", line)
                ):
                    say(f"still names {f}: {p.relative_to(ROOT)}:{i}: {line.strip()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
