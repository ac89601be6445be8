#!/usr/bin/env python3
"""Move the code into apps along the real boundaries (issue 16) and rewrite every reference.

Run from the repository root on a clean tree, with the project's interpreter (it calls Django
to write the display models' migration, and ruff to sort the imports it rewrote):

    .venv/bin/python scripts/relayout.py            # moves, rewrites, prints a summary
    .venv/bin/python scripts/relayout.py --dry-run  # prints what it would move, changes nothing

Why a script: the move lands on a tree other engineers change at the same time, so it works
from rules, not from a list of today's files. A file moves by the longest prefix in MOVES
(a new module added under a moved package moves with it; a new module elsewhere in
`streaming/` stays), then every reference is rewritten by module name, symbol name, dotted
string and slash path. It is idempotent: a second run finds nothing to move or rewrite.
What it cannot rewrite is listed in RELAYOUT-TODO.md.

Only the standard library is imported here; Django and ruff run as subprocesses.
"""

from __future__ import annotations

import argparse
import ast
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path.cwd()
TODO_FILE = "RELAYOUT-TODO.md"

# -- 1. where files go: (old path prefix, new path prefix); a prefix ending in "/" is a folder.
# The longest matching prefix wins, so a file rule beats its folder's rule.
MOVES: list[tuple[str, str]] = [
    # compat: the GameStream protocol, its stream engine, launch parameters and host adapter
    ("streaming/compat/", "compat/"),
    ("streaming/engine/", "compat/engine/"),
    ("streaming/launchconfig.py", "compat/launchconfig.py"),
    ("pairing/nvhttp_backend.py", "compat/nvhttp_backend.py"),
    (
        "streaming/management/commands/run_compat_plane.py",
        "compat/management/commands/run_compat_plane.py",
    ),
    # native: the WebRTC plane, its DRF routes under api/, its page's template and assets
    ("streaming/native/", "native/"),
    ("streaming/native/api.py", "native/api/views.py"),
    ("streaming/native/urls_v1.py", "native/api/urls_v1.py"),
    ("templates/native/", "native/templates/native/"),
    ("static/native/", "native/static/native/"),
    # displays: virtual displays, their policy and reaper, monitors, compositors, capture choice
    ("streaming/displays/", "displays/"),
    ("streaming/monitors.py", "displays/monitors.py"),
    ("streaming/compositors.py", "displays/compositors.py"),
    ("streaming/capture.py", "displays/capture.py"),
    (
        "streaming/management/commands/drive_display.py",
        "displays/management/commands/drive_display.py",
    ),
    # games: a session's game (lifecycle, registry, watcher, detection) and its app process
    ("streaming/game/", "games/"),
    ("streaming/apprun.py", "games/apprun.py"),
    # media: Django-free encode, capture, sound and input
    ("streaming/engine/encoder.py", "media/encoder.py"),
    ("streaming/engine/pacing.py", "media/pacing.py"),
    ("streaming/engine/audiofeed.py", "media/audiofeed.py"),
    ("streaming/encoders.py", "media/encoders.py"),
    ("streaming/gpus.py", "media/gpus.py"),
    ("streaming/framesource.py", "media/framesource.py"),
    ("streaming/audio/", "media/audio/"),
    ("streaming/input/", "media/input/"),
    ("streaming/wayland/", "media/wayland/"),
]

# New Django apps: label -> (AppConfig class, docstring). Their models, admin, commands and
# templates need an app; `games` and `media` have none of those and stay plain packages.
NEW_APPS: dict[str, tuple[str, str]] = {
    "displays": ("DisplaysConfig", "Virtual displays: models, policy, state machine, reaper."),
    "compat": ("CompatConfig", "The GameStream (Moonlight) plane: protocol, engine, listener."),
    "native": ("NativeConfig", "The native (WebRTC) plane: offer, peer, relay, player page."),
}
# Packages that need an __init__.py (apps' subfolders and the plain packages).
NEW_PACKAGES: dict[str, str] = {
    "media": '"""Encode, capture, sound and input: no Django, no app (imports only the standard\n'
    'library, third-party packages, hostmgmt.lib and hostmgmt.config)."""\n',
    "games": "",
    "native/api": "",
    "displays/api": "",
    "displays/migrations": "",
    "displays/management": "",
    "displays/management/commands": "",
    "compat/management": "",
    "compat/management/commands": "",
}

# Top-level definitions that leave a module: (module file after the moves, new file, names
# moved, names copied into both, docstring of a new file).
SPLITS: list[dict] = [
    {
        "src": "streaming/models.py",
        "dst": "displays/models.py",
        "move": ["VirtualDisplay", "CustomPreset"],
        "copy": [],
        "doc": "Display state kept in the database. The tables keep their `streaming_` names: "
        "the models\nmoved app without a database change (migrations 0001 of `displays`).",
        "db_table": {
            "VirtualDisplay": "streaming_virtualdisplay",
            "CustomPreset": "streaming_custompreset",
        },  # fmt: skip
    },
    {
        "src": "streaming/admin.py",
        "dst": "displays/admin.py",
        "move": ["VirtualDisplayAdmin", "CustomPresetAdmin"],
        "copy": [],
        "doc": "Django admin of the `displays` app.",
    },
    {
        "src": "streaming/api/views.py",
        "dst": "displays/api/views.py",
        "move": [
            "CaptureMethodsView",
            "CompositorsView",
            "HeadlessCompositorsView",
            "MonitorsView",
            "DisplaySettingsView",
            "DisplayLayoutView",
            "PresetsView",
            "PresetView",
            "DisplayReleaseView",
            "DisplayStateView",
        ],  # fmt: skip
        "copy": ["OBJ", "json_body", "_raise"],
        "doc": "Management routes of the machine's displays, monitors, compositors and capture.",
        "src_doc": ("displays, GPUs, capture and readiness", "GPUs and readiness"),
    },
    {
        # The H.264 clean-up runs inside the encoder (media); the packetizer keeps using it.
        "src": "compat/video.py",
        "dst": "media/h264.py",
        "move": ["_NAL_START", "split_nals", "h264_for_moonlight"],
        "copy": [],
        "doc": "Annex-B H.264 helpers shared by the encoder and the GameStream packetizer.",
    },
]

# URL patterns that leave a URLconf with the views they name: (src, dst, alias in src, names,
# the dst's import line, the dst's docstring, (file that includes src, include line, new line)).
URL_SPLITS: list[dict] = [
    {
        "src": "streaming/api/urls_v1.py",
        "dst": "displays/api/urls_v1.py",
        "alias": "views",
        "names": SPLITS[2]["move"],
        "import": "from displays.api import views",
        "doc": "Management API routes of the `displays` app (mounted at /api/v1/).",
        "include": (
            "hostmgmt/urls.py",
            'path("", include("streaming.api.urls_v1")),',
            'path("", include("displays.api.urls_v1")),',
        ),
    },
]

# Model labels that change app: model name -> (old app, new app).
MOVED_MODELS = {
    "VirtualDisplay": ("streaming", "displays"),
    "CustomPreset": ("streaming", "displays"),
}
DISPLAYS_STREAMING_MIGRATION = "move_display_models_to_displays"

TEXT_SUFFIXES = {
    ".py", ".md", ".txt", ".toml", ".cfg", ".ini", ".html", ".js", ".css", ".sh", ".yml",
    ".yaml", ".json", ".service", ".importlinter",
}  # fmt: skip
TEXT_NAMES = {"Makefile", ".importlinter", "README", "setup.cfg"}
MIGRATION_TEST_PATH = "tests/hoststate/test_display_models_moved.py"
SKIP_REWRITE = ("scripts/relayout.py", "scripts/relayout-apps.md", TODO_FILE, MIGRATION_TEST_PATH)

changes: list[str] = []
todo: list[str] = []


def say(line: str) -> None:
    sys.stdout.write(line + "\n")


def sh(*args: str, check: bool = True, **kw) -> subprocess.CompletedProcess:
    return subprocess.run(args, check=check, text=True, capture_output=True, cwd=ROOT, **kw)


def tracked() -> list[str]:
    out = sh("git", "ls-files", "-z").stdout
    return [p for p in out.split("\0") if p and (ROOT / p).exists()]


# -- path and module maps -------------------------------------------------------------------
def map_path(path: str) -> str | None:
    """The new path of `path` (file or folder, no trailing slash needed), None if it stays."""
    best = None
    for old, new in MOVES:
        if old.endswith("/"):
            if path == old[:-1]:
                hit = (len(old), new[:-1])
            elif path.startswith(old):
                hit = (len(old), new + path[len(old) :])
            else:
                continue
        elif path == old:
            hit = (len(old) + 1, new)
        else:
            continue
        if best is None or hit[0] > best[0]:
            best = hit
    return best[1] if best else None


def module_of(path: str) -> str | None:
    if not path.endswith(".py"):
        return None
    mod = path[:-3].replace("/", ".")
    return mod[: -len(".__init__")] if mod.endswith(".__init__") else mod


def build_module_map(moved: dict[str, str]) -> dict[str, str]:
    """Old dotted module -> new, for every moved file and every moved folder."""
    out: dict[str, str] = {}
    for old, new in moved.items():
        o, n = module_of(old), module_of(new)
        if o and n:
            out[o] = n
    for old, new in MOVES:
        if old.split("/")[0] in ("templates", "static"):
            continue  # not Python packages
        if old.endswith("/") and new.endswith("/"):
            out.setdefault(old[:-1].replace("/", "."), new[:-1].replace("/", "."))
    return out


class Rewriter:
    def __init__(self, modmap: dict[str, str], symbols: dict[tuple[str, str], str]):
        self.modmap = modmap
        self.symbols = symbols  # (new module, name) -> module the name now lives in
        roots = sorted({m.split(".")[0] for m in modmap} | {m.split(".")[0] for m, _ in symbols})
        alt = "|".join(map(re.escape, roots))
        self.dotted = re.compile(rf"(?<![\w.])(?:{alt})(?:\.[A-Za-z_]\w*)+")
        proots = sorted({old.split("/")[0] for old, _ in MOVES})
        palt = "|".join(map(re.escape, proots))
        self.slashed = re.compile(rf"(?<![\w./-])(?:{palt})(?:/[\w.-]+)+/?")

    def map_module(self, mod: str) -> str:
        parts = mod.split(".")
        for k in range(len(parts), 0, -1):
            head = ".".join(parts[:k])
            if head in self.modmap:
                return ".".join([self.modmap[head], *parts[k:]])
        return mod

    def map_dotted(self, chain: str) -> str:
        new = self.map_module(chain)
        parts = new.split(".")
        for k in range(len(parts) - 1, 0, -1):
            target = self.symbols.get((".".join(parts[:k]), parts[k]))
            if target:
                return ".".join([target, *parts[k:]])
        return new

    def map_slashed(self, m: re.Match) -> str:
        text = m.group(0)
        core = text.rstrip(".-")
        tail = text[len(core) :]
        slash = core.endswith("/")
        new = map_path(core.rstrip("/"))
        if new is None:
            return text
        return new + ("/" if slash else "") + tail

    # ---- Python imports ----
    def import_from(self, node: ast.ImportFrom) -> str | None:
        if node.level or not node.module:
            return None
        mod = node.module
        newmod = self.map_module(mod)
        groups: dict[str, list[str]] = {}
        plain: list[str] = []
        for alias in node.names:
            name, asname = alias.name, alias.asname
            sub = f"{mod}.{name}"
            if (newmod, name) in self.symbols:
                target, leaf = self.symbols[(newmod, name)], name
            elif name != "*" and self.map_module(sub) != sub:
                full = self.map_module(sub)
                target, _, leaf = full.rpartition(".")
                if leaf != name and not asname:
                    asname = name
            else:
                target, leaf = newmod, name
            spelled = leaf if not asname or asname == leaf else f"{leaf} as {asname}"
            if target:
                groups.setdefault(target, []).append(spelled)
            else:
                plain.append(spelled)
        if list(groups) == [mod] and not plain:
            return None
        lines = [f"from {t} import {', '.join(names)}" for t, names in groups.items()]
        lines += [f"import {p}" for p in plain]
        return lines

    def import_plain(self, node: ast.Import) -> list[str] | None:
        changed = False
        lines = []
        for alias in node.names:
            new = self.map_module(alias.name)
            changed |= new != alias.name
            lines.append(f"import {new}" + (f" as {alias.asname}" if alias.asname else ""))
        return lines if changed else None

    def python(self, path: str, text: str) -> str:
        try:
            tree = ast.parse(text)
        except SyntaxError as exc:
            todo.append(f"`{path}`: not parsed ({exc.msg}); only strings and paths rewritten")
            return self.plain(text)
        lines = text.splitlines(keepends=True)
        offsets = [0]
        for line in lines:
            offsets.append(offsets[-1] + len(line))
        edits = []
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom):
                new = self.import_from(node)
            elif isinstance(node, ast.Import):
                new = self.import_plain(node)
            else:
                continue
            if new is None:
                continue
            start = offsets[node.lineno - 1] + len(
                lines[node.lineno - 1].encode()[: node.col_offset].decode()
            )
            end = offsets[node.end_lineno - 1] + len(
                lines[node.end_lineno - 1].encode()[: node.end_col_offset].decode()
            )
            if "#" in text[start:end]:
                todo.append(f"`{path}:{node.lineno}`: a comment inside a rewritten import was lost")
            indent = " " * node.col_offset
            edits.append((start, end, ("\n" + indent).join(new)))
        for start, end, new in sorted(edits, reverse=True):
            text = text[:start] + new + text[end:]
        return self.plain(text)

    def plain(self, text: str) -> str:
        text = self.dotted.sub(lambda m: self.map_dotted(m.group(0)), text)
        text = self.slashed.sub(self.map_slashed, text)
        return relabel(text)


def relabel(text: str) -> str:
    """App labels of the moved models: get_model args, "app.Model" labels, permission
    codenames, admin URL names and admin paths. Table names (`streaming_virtualdisplay`) stay."""
    for model, (old, new) in MOVED_MODELS.items():
        low = model.lower()
        names = f"(?:{model}|{low})"
        text = re.sub(
            rf"""(["']){old}\1(\s*,\s*)(["']){names}\3""",
            lambda m, old=old, new=new: m.group(0).replace(old, new, 1),
            text,
        )
        text = re.sub(rf"(?<![\w.]){old}\.({names})\b", rf"{new}.\1", text)
        text = re.sub(rf"(?<![\w.]){old}\.((?:add|change|delete|view)_{low})\b", rf"{new}.\1", text)
        text = re.sub(
            rf"\b{old}_{low}_(changelist|change|add|delete|history)\b", rf"{new}_{low}_\1", text
        )
        text = re.sub(rf"/admin/{old}/{low}\b", f"/admin/{new}/{low}", text)
    return text


# -- steps ----------------------------------------------------------------------------------
def ensure_clean() -> None:
    if sh("git", "status", "--porcelain").stdout.strip():
        sys.exit("relayout: the tree has uncommitted changes; commit them first")
    if not (ROOT / "manage.py").exists():
        sys.exit("relayout: run from the repository root")


def models_in_step() -> None:
    """The display models' new migration is rendered from the models, so the models must match
    the migrations before the move (else a pending change would be recorded as done)."""
    env = dict(os.environ, HOST_STATE_DIR=tempfile.mkdtemp(prefix="relayout-"))
    out = subprocess.run(
        [sys.executable, "manage.py", "makemigrations", "--check", "--dry-run"],
        cwd=ROOT, env=env, text=True, capture_output=True,
    )  # fmt: skip
    if out.returncode:
        sys.exit(f"relayout: models and migrations differ; make the migration first\n{out.stdout}")


def move_files(dry: bool) -> dict[str, str]:
    moved: dict[str, str] = {}
    for path in tracked():
        new = map_path(path)
        if not new:
            continue
        if (ROOT / new).exists():
            todo.append(f"`{path}` not moved: `{new}` exists already")
            continue
        moved[path] = new
    for old, new in sorted(moved.items()):
        if dry:
            say(f"would move {old} -> {new}")
            continue
        (ROOT / new).parent.mkdir(parents=True, exist_ok=True)
        sh("git", "mv", old, new)
    if moved and not dry:
        changes.append(f"moved {len(moved)} files")
        prune_empty_dirs({str(Path(p).parent) for p in moved})
    return moved


def prune_empty_dirs(dirs: set[str]) -> None:
    """Drop folders the moves emptied (ignored __pycache__ folders would keep them alive)."""
    for d in sorted(dirs, key=len, reverse=True):
        p = ROOT / d
        while p != ROOT and p.is_dir():
            rest = [c for c in p.iterdir() if c.name != "__pycache__"]
            if rest:
                break
            for cache in p.glob("__pycache__"):
                for f in cache.iterdir():
                    f.unlink()
                cache.rmdir()
            p.rmdir()
            p = p.parent


def write_new(path: str, text: str) -> bool:
    p = ROOT / path
    if p.exists():
        return False
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(text)
    sh("git", "add", path)
    changes.append(f"created {path}")
    return True


def scaffold() -> None:
    for label, (cls, doc) in NEW_APPS.items():
        write_new(f"{label}/__init__.py", "")
        write_new(
            f"{label}/apps.py",
            f'from django.apps import AppConfig\n\n\nclass {cls}(AppConfig):\n    """{doc}"""\n\n'
            f'    name = "{label}"\n    default_auto_field = "django.db.models.BigAutoField"\n',
        )
    for pkg, text in NEW_PACKAGES.items():
        if pkg == "media" or (ROOT / pkg.split("/")[0]).is_dir():
            write_new(f"{pkg}/__init__.py", text)


def top_defs(tree: ast.Module) -> dict[str, ast.stmt]:
    out = {}
    for node in tree.body:
        if isinstance(node, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            out[node.name] = node
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for t in targets:
                if isinstance(t, ast.Name):
                    out[t.id] = node
    return out


def span(lines: list[str], node: ast.stmt) -> tuple[int, int]:
    """0-based [start, end) line span of a top-level statement with its decorators and the
    comment lines right above it."""
    start = min([node.lineno] + [d.lineno for d in getattr(node, "decorator_list", [])]) - 1
    while start > 0 and lines[start - 1].lstrip().startswith("#"):
        start -= 1
    return start, node.end_lineno


def split_module(spec: dict, symbols: dict[tuple[str, str], str]) -> list[str]:
    src, dst = spec["src"], spec["dst"]
    src_mod, dst_mod = module_of(src), module_of(dst)
    for name in spec["move"]:
        symbols[(src_mod, name)] = dst_mod
    path = ROOT / src
    if not path.exists():
        return []
    text = path.read_text()
    tree = ast.parse(text)
    defs = top_defs(tree)
    moving = [n for n in spec["move"] if n in defs]
    if not moving:
        return []
    if (ROOT / dst).exists():
        todo.append(f"`{src}`: {', '.join(moving)} not split out, `{dst}` exists")
        return []
    lines = text.splitlines(keepends=True)
    imports = [n for n in tree.body if isinstance(n, (ast.Import, ast.ImportFrom))]
    header = "".join(
        "".join(lines[n.lineno - 1 : n.end_lineno]) for n in imports if n.col_offset == 0
    )
    taken: list[tuple[int, int]] = []
    copied: list[tuple[int, int]] = []
    for name in spec["move"]:
        if name in defs:
            taken.append(span(lines, defs[name]))
    for name in spec["copy"]:
        if name in defs:
            copied.append(span(lines, defs[name]))
    body = ""
    for s, e in sorted(set(copied) | set(taken)):
        body += "\n\n" + "".join(lines[s:e]).rstrip("\n") + "\n"
    if spec.get("db_table"):
        for model, table in spec["db_table"].items():
            body = add_db_table(body, model, table)
    new = f'"""{spec["doc"]}"""\n\n{header}{body}'
    write_new(dst, new)
    keep = [ln for i, ln in enumerate(lines) if not any(s <= i < e for s, e in set(taken))]
    rest = re.sub(r"\n{3,}(?=\S)", "\n\n\n", "".join(keep)).rstrip("\n") + "\n"
    used = {n.id for n in ast.walk(ast.parse(rest)) if isinstance(n, ast.Name)}
    back = [n for n in moving if n in used]
    if back:  # the rest of the module still uses a moved name: import it from its new home
        rest_tree = ast.parse(rest)
        last = max((n.end_lineno for n in rest_tree.body if isinstance(n, ast.ImportFrom)),
                   default=0)  # fmt: skip
        rl = rest.splitlines(keepends=True)
        rl.insert(last, f"from {dst_mod} import {', '.join(back)}\n")
        rest = "".join(rl)
    if spec.get("src_doc") and spec["src_doc"][0] in rest:
        rest = rest.replace(*spec["src_doc"], 1)
    path.write_text(rest)
    changes.append(f"split {', '.join(moving)} from {src} into {dst}")
    return [src, dst]


def add_db_table(body: str, model: str, table: str) -> str:
    """Give `model` an explicit db_table (in its Meta, or a new Meta) unless it has one."""
    m = re.search(rf"^class {model}\(.*?(?=^\S|\Z)", body, re.S | re.M)
    if not m or "db_table" in m.group(0):
        return body
    cls = m.group(0)
    if "    class Meta:\n" in cls:
        meta = f'    class Meta:\n        db_table = "{table}"\n'
        cls = cls.replace("    class Meta:\n", meta, 1)
    else:
        cls = cls.rstrip("\n") + f'\n\n    class Meta:\n        db_table = "{table}"\n\n'
    return body[: m.start()] + cls + body[m.end() :]


def split_urls(spec: dict) -> list[str]:
    src = ROOT / spec["src"]
    if not src.exists() or (ROOT / spec["dst"]).exists():
        return []
    lines = src.read_text().splitlines(keepends=True)
    pat = re.compile(rf"\b{spec['alias']}\.({'|'.join(spec['names'])})\b")
    moving = [ln for ln in lines if pat.search(ln)]
    if not moving:
        return []
    keep = [ln for ln in lines if ln not in moving]
    src.write_text("".join(keep))
    write_new(
        spec["dst"],
        f'"""{spec["doc"]}"""\n\nfrom django.urls import path\n\n{spec["import"]}\n\n'
        f"urlpatterns = [\n{''.join(moving)}]\n",
    )
    inc_file, anchor, line = spec["include"]
    inc = ROOT / inc_file
    text = inc.read_text()
    if line not in text and anchor in text:
        text = re.sub(
            rf"^(\s*){re.escape(anchor)}\n", lambda m: m.group(0) + m.group(1) + line + "\n",
            text, count=1, flags=re.M,
        )  # fmt: skip
        inc.write_text(text)
    changes.append(f"split {len(moving)} URL patterns from {spec['src']} into {spec['dst']}")
    return [spec["src"], spec["dst"], inc_file]


def install_apps() -> list[str]:
    path = ROOT / "hostmgmt/settings.py"
    text = path.read_text()
    m = re.search(r"INSTALLED_APPS = \[(.*?)\n\]", text, re.S)
    if not m:
        todo.append("hostmgmt/settings.py: INSTALLED_APPS not found; add " + ", ".join(NEW_APPS))
        return []
    block = m.group(1)
    missing = [a for a in NEW_APPS if f'"{a}"' not in block]
    if not missing:
        return []
    new_block = block + "".join(f'\n    "{a}",' for a in missing)
    path.write_text(text[: m.start(1)] + new_block + text[m.end(1) :])
    changes.append(f"INSTALLED_APPS += {', '.join(missing)}")
    return ["hostmgmt/settings.py"]


def is_text(path: str) -> bool:
    p = Path(path)
    return p.suffix in TEXT_SUFFIXES or p.name in TEXT_NAMES


def rewrite_all(rw: Rewriter) -> list[str]:
    touched = []
    for path in tracked():
        if path in SKIP_REWRITE or "/migrations/" in path or not is_text(path):
            continue
        p = ROOT / path
        try:
            text = p.read_text()
        except UnicodeDecodeError:
            continue
        new = fix_loggers(path, fix_depth(path, text)) if path.endswith(".py") else text
        new = rw.python(path, new) if path.endswith(".py") else rw.plain(new)
        if path.endswith(".py"):
            new = split_attrs(new)
        if new != text:
            p.write_text(new)
            touched.append(path)
    if touched:
        changes.append(f"rewrote references in {len(touched)} files")
    return touched


def split_attrs(text: str) -> str:
    """`video.h264_for_moonlight(...)` after `from compat import video`: a name that left the
    module is reached through its new module, imported the same way."""
    for spec in SPLITS:
        src_mod, dst_mod = module_of(spec["src"]), module_of(spec["dst"])
        sp, _, sl = src_mod.rpartition(".")
        dp, _, dl = dst_mod.rpartition(".")
        imp = re.search(rf"^( *)from {re.escape(sp)} import {sl}\n", text, re.M)
        if not imp:
            continue
        names = "|".join(map(re.escape, spec["move"]))
        new = re.sub(rf"(?<![\w.]){sl}\.({names})\b", rf"{dl}.\1", text)
        if new != text:
            line = f"{imp.group(1)}from {dp} import {dl}\n"
            if line not in new:
                new = new[: imp.end()] + line + new[imp.end() :]
            text = new
    return text


MOVED_FROM: dict[str, str] = {}  # new path -> old path, for the logger rule


def fix_depth(path: str, text: str) -> str:
    """`Path(__file__).resolve().parents[2]` (or `.parent.parent`) in a moved module counts
    folders: it keeps naming the same folder when the module moved up or down."""
    old_path = MOVED_FROM.get(path)
    if not old_path or "__file__" not in text:
        return text
    delta = old_path.count("/") - path.count("/")
    if not delta:
        return text

    def parents(m: re.Match) -> str:
        n = int(m.group(2)) - delta
        if n < 0:
            todo.append(f"`{path}`: `{m.group(0)}` points above the repository after the move")
            return m.group(0)
        return f"{m.group(1)}[{n}]"

    def chain(m: re.Match) -> str:
        n = m.group(2).count(".parent") - delta
        if n < 1:
            todo.append(f"`{path}`: `{m.group(0)}` needs fixing by hand after the move")
            return m.group(0)
        return m.group(1) + ".parent" * n

    text = re.sub(r"(__file__\)(?:\.resolve\(\))?\.parents)\[(\d+)\]", parents, text)
    text = re.sub(r"(__file__\)(?:\.resolve\(\))?)((?:\.parent\b)+)", chain, text)
    if "os.path.dirname(" in text:
        todo.append(f"`{path}`: uses os.path.dirname with __file__; check the folder depth")
    return text


def fix_loggers(path: str, text: str) -> str:
    """`getLogger("streaming.engine")` in a moved module names the module's new package: the
    literal was the old module's package (k levels up), so it becomes the new module k levels
    up. Loggers named `__name__` follow by themselves."""
    old_path = MOVED_FROM.get(path)
    if not old_path:
        return text
    old_mod, new_mod = module_of(old_path), module_of(path)
    if not old_mod or not new_mod:
        return text

    def sub(m: re.Match) -> str:
        name = m.group(2)
        old_parts, new_parts = old_mod.split("."), new_mod.split(".")
        for k in range(0, len(old_parts)):
            if ".".join(old_parts[: len(old_parts) - k]) == name:
                keep = max(1, len(new_parts) - k)
                return f"{m.group(1)}{'.'.join(new_parts[:keep])}{m.group(3)}"
        return m.group(0)

    return re.sub(r"""(getLogger\(["'])([\w.]+)(["']\))""", sub, text)


# -- migrations -----------------------------------------------------------------------------
def leaf_migration(app: str) -> str:
    folder = ROOT / app / "migrations"
    names = {p.stem for p in folder.glob("[0-9]*.py")}
    needed = set()
    for name in names:
        tree = ast.parse((folder / f"{name}.py").read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.Tuple) and len(node.elts) == 2:
                a, b = node.elts
                if isinstance(a, ast.Constant) and a.value == app and isinstance(b, ast.Constant):
                    needed.add(b.value)
    leaves = sorted(names - needed)
    if len(leaves) != 1:
        sys.exit(f"relayout: {app} migrations have {len(leaves)} leaves {leaves}; merge them first")
    return leaves[0]


GEN_MIGRATION = r"""
import os, sys
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "hostmgmt.settings")
import django
django.setup()
from django.apps import apps
from django.db import migrations
from django.db.migrations.state import ModelState
from django.db.migrations.writer import OperationWriter
models = sys.argv[1].split(",")
ops = []
for name in models:
    st = ModelState.from_model(apps.get_model("displays", name))
    ops.append(migrations.CreateModel(
        name=st.name, fields=list(st.fields.items()), options=st.options, bases=st.bases,
        managers=st.managers))
op = migrations.SeparateDatabaseAndState(state_operations=ops, database_operations=[])
text, imports = OperationWriter(op, indentation=2).serialize()
print(text)
"""

DISPLAYS_0001 = '''"""The display models moved here from `streaming` without touching the database:
their tables keep their names (`db_table`), so this migration only tells Django's state where they
live, and relabels their content types (admin log entries and permissions follow)."""

from django.db import migrations, models


def relabel(apps, schema_editor, old="streaming", new="displays"):
    ContentType = apps.get_model("contenttypes", "ContentType")
    for model in MODELS:
        if not ContentType.objects.filter(app_label=new, model=model).exists():
            ContentType.objects.filter(app_label=old, model=model).update(app_label=new)


def unrelabel(apps, schema_editor):
    relabel(apps, schema_editor, old="displays", new="streaming")


MODELS = {models_lower}


class Migration(migrations.Migration):
    initial = True

    dependencies = [
        ("contenttypes", "0002_remove_content_type_name"),
        ("streaming", "{leaf}"),
    ]

    operations = [
{operation}
        migrations.RunPython(relabel, unrelabel),
    ]
'''

STREAMING_MOVE = '''"""The display models now live in the `displays` app (same tables): state
only."""

from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [
        ("streaming", "{leaf}"),
        ("displays", "0001_initial"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
{deletes}
            ],
            database_operations=[],
        ),
    ]
'''


def write_migrations() -> list[str]:
    folder = ROOT / "displays/migrations"
    if any(folder.glob("0001_*.py")) or not (ROOT / "displays/models.py").exists():
        return []
    leaf = leaf_migration("streaming")
    models = list(MOVED_MODELS)
    env = dict(os.environ, HOST_STATE_DIR=tempfile.mkdtemp(prefix="relayout-"))
    out = subprocess.run(
        [sys.executable, "-c", GEN_MIGRATION, ",".join(models)],
        cwd=ROOT, env=env, text=True, capture_output=True,
    )  # fmt: skip
    if out.returncode:
        sys.exit(f"relayout: could not render the displays migration:\n{out.stderr}")
    operation = out.stdout.rstrip("\n")
    operation = re.sub(r"\n *'(indexes|constraints)': \[\],", "", operation)
    write_new(
        "displays/migrations/0001_initial.py",
        DISPLAYS_0001.replace("{leaf}", leaf)
        .replace("{operation}", operation)
        .replace("{models_lower}", repr(tuple(m.lower() for m in models))),
    )
    number = int(leaf.split("_")[0]) + 1
    deletes = "\n".join(f'                migrations.DeleteModel(name="{m}"),' for m in models)
    name = f"streaming/migrations/{number:04d}_{DISPLAYS_STREAMING_MIGRATION}.py"
    write_new(name, STREAMING_MOVE.replace("{leaf}", leaf).replace("{deletes}", deletes))
    return ["displays/migrations/0001_initial.py", name]


MIGRATION_TEST = '''"""The display models moved from `streaming` to `displays` without a database
change: a row written at the old state is read through the new model, and its content type
follows."""

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor


@pytest.mark.django_db(transaction=True)
def test_display_rows_survive_the_move_between_apps():
    executor = MigrationExecutor(connection)
    moved = executor.loader.get_migration("displays", "0001_initial")
    before = [d for d in moved.dependencies if d[0] == "streaming"]
    executor.migrate(before + [("displays", None)])
    old = executor.loader.project_state(
        before + [("contenttypes", "0002_remove_content_type_name")]
    ).apps
    old.get_model("streaming", "VirtualDisplay").objects.create(
        slot=7, width=1280, height=720, refresh=60, state="pinned", client="old-host",
        identity_key="k", x_display=":7"
    )
    old.get_model("contenttypes", "ContentType").objects.get_or_create(
        app_label="streaming", model="virtualdisplay"
    )
    executor = MigrationExecutor(connection)
    executor.migrate(executor.loader.graph.leaf_nodes())

    from django.contrib.contenttypes.models import ContentType

    from displays.models import VirtualDisplay

    ContentType.objects.clear_cache()
    row = VirtualDisplay.objects.get(slot=7)
    assert (row.client, row.state, row.mode) == ("old-host", "pinned", "1280x720@60")
    assert VirtualDisplay._meta.db_table == "streaming_virtualdisplay"
    assert ContentType.objects.filter(app_label="displays", model="virtualdisplay").exists()
    assert not ContentType.objects.filter(app_label="streaming", model="virtualdisplay").exists()
    VirtualDisplay.objects.filter(slot=7).delete()
'''


# -- docs ------------------------------------------------------------------------------------
# The "Apps" section of docs/architecture.md, kept beside this script.
APPS_SECTION_FILE = Path(__file__).with_name("relayout-apps.md")

README_ROWS = (
    "| `streaming` | sessions and history, displays, GPUs, capture, and the planes' protocol code |",  # noqa: E501
    "| `streaming` | the session core: lifecycle, history, stats, the session API |\n"
    "| `compat` | the GameStream plane: protocol, stream engine, nvhttp listener, host adapter |\n"
    "| `native` | the native (WebRTC) plane: offer, peer, relay, player page, its API |\n"
    "| `displays` | virtual displays (models, policy, reaper), monitors, compositors, capture |\n"
    "| `games` | a session's game: lifecycle, registry, watcher; the app process |\n"
    "| `media` | Django-free encode, GPUs, frame sources, audio and input |",
)


NEW_ROOTS = ["compat", "native", "displays", "games", "media"]


def import_linter_roots() -> list[str]:
    """import-linter only sees the packages in `root_packages`: add the new ones (its TOML list
    form and its INI indented-lines form). Their layers are a person's call (RELAYOUT-TODO)."""
    out = []
    for name in ("pyproject.toml", ".importlinter", "setup.cfg"):
        path = ROOT / name
        if not path.exists():
            continue
        text = path.read_text()
        toml = re.search(r"^root_packages\s*=\s*\[(.*?)\]", text, re.M | re.S)
        ini = re.search(r"^root_packages\s*[=:][ \t]*\n((?:[ \t]+\S.*\n)+)", text, re.M)
        if toml:
            have = re.findall(r"[\"']([\w.]+)[\"']", toml.group(1))
            missing = [r for r in NEW_ROOTS if r not in have]
            if missing:
                body = toml.group(1).rstrip().rstrip(",")
                sep = ",\n    " if "\n" in body else ", "
                body += sep + sep.join(f'"{r}"' for r in missing) + ("," if "\n" in body else "")
                body += "\n" if "\n" in toml.group(1) else ""
                text = text[: toml.start(1)] + body + text[toml.end(1) :]
        elif ini:
            have = ini.group(1).split()
            missing = [r for r in NEW_ROOTS if r not in have]
            if missing:
                indent = re.match(r"[ \t]+", ini.group(1)).group(0)
                add = "".join(f"{indent}{r}\n" for r in missing)
                text = text[: ini.end(1)] + add + text[ini.end(1) :]
        else:
            continue
        if missing:
            path.write_text(text)
            out.append(name)
            changes.append(f"{name}: import-linter root_packages += {', '.join(missing)}")
    return out


def write_docs() -> list[str]:
    out = []
    arch = ROOT / "docs/architecture.md"
    if arch.exists():
        text = arch.read_text()
        section = APPS_SECTION_FILE.read_text()
        if "\n## Apps\n" not in text:
            anchor = "\n## Request bodies\n"
            if anchor in text:
                text = text.replace(anchor, "\n" + section + anchor, 1)
            else:
                text = text.rstrip("\n") + "\n\n" + section
            arch.write_text(text)
            out.append("docs/architecture.md")
            changes.append("docs/architecture.md: added the Apps section")
    readme = ROOT / "README.md"
    if readme.exists():
        text = readme.read_text()
        if README_ROWS[0] in text:
            readme.write_text(text.replace(*README_ROWS, 1))
            out.append("README.md")
            changes.append("README.md: code layout rows of the new apps")
        elif "| `media` |" not in text:
            todo.append("README.md: the code layout table was not found; add the new apps")
    return out


# -- what is left to a person ---------------------------------------------------------------
# Imports that cross the new boundaries the wrong way: (package, imported roots it should not
# import, why). Listed with file and line after the move (what the layout makes visible).
BOUNDARIES = [
    ("media", "streaming|native|compat|displays|games|hooks|pairing|library|django|rest_framework"
     "|celery|channels", "media is Django-free and imports no app"),
    ("games", "streaming|native|compat|django|rest_framework", "games serves both planes"),
    ("displays", "streaming|native|compat|games", "displays sit below the session core"),
    ("streaming", "native|compat", "the session core imports no plane (each brings its transport)"),
    ("native", "compat", "one plane does not import the other"),
    ("compat", "native", "one plane does not import the other"),
]  # fmt: skip

KNOWN_CHOICES = [
    "`displays/capture.py` (capture-method choice per display) is in `displays`, not `media`: it "
    "imports `displays.xvfb`, `policy`, `headless` and `sway`, and the display state machine "
    "imports it back.",
    "`games` is a plain package, not a Django app: no models, commands or views; its two routes "
    "(`/session/settings`, `/game/end`) stay with the session API in `streaming/api/`.",
]


def boundary_report() -> list[str]:
    out = []
    for pkg, roots, why in BOUNDARIES:
        pat = re.compile(rf"^\s*(?:from|import) ({roots})\b[\w.]*", re.M)
        for path in sorted(p for p in tracked() if p.startswith(pkg + "/") and p.endswith(".py")):
            if "/migrations/" in path:
                continue
            text = (ROOT / path).read_text()
            for m in pat.finditer(text):
                line = text.count("\n", 0, m.start()) + 1
                out.append(f"`{path}:{line}` imports `{m.group(0).split()[-1]}`: {why}")
    if re.search(r"^\[tool\.importlinter\]", (ROOT / "pyproject.toml").read_text(), re.M):
        out.append(
            "import-linter: `root_packages` has the new packages; give `displays.api`, "
            "`native.api`, `native.views` and `media.h264` their layer, and add a "
            '"<app>\'s views are its own" contract for `displays`, `native` and `compat`.'
        )
    return out


def leftovers(moved_old: list[str]) -> list[str]:
    """References to moved modules that survived the rewrite (a person reads each one)."""
    found = []
    olds = sorted(set(moved_old) | {m.replace(".", "/") for m in moved_old}, key=len, reverse=True)
    if not olds:
        return found
    pat = re.compile(r"(?<![\w./-])(" + "|".join(re.escape(o) for o in olds) + r")\b")
    for path in tracked():
        if path in SKIP_REWRITE or "/migrations/" in path or not is_text(path):
            continue
        try:
            text = (ROOT / path).read_text()
        except UnicodeDecodeError:
            continue
        for n, line in enumerate(text.splitlines(), 1):
            if pat.search(line):
                found.append(f"`{path}:{n}`: {line.strip()[:120]}")
    return found


def ruff(files: list[str], split_files: list[str]) -> None:
    py = sorted({f for f in files if f.endswith(".py") and (ROOT / f).exists()})
    if not py:
        return
    try:
        if split_files:
            sh(sys.executable, "-m", "ruff", "check", "--fix", "--select", "F401,I001",
               *split_files, check=False)  # fmt: skip
        sh(sys.executable, "-m", "ruff", "check", "--fix", "--select", "I001", *py, check=False)
        sh(sys.executable, "-m", "ruff", "format", *py, check=False)
    except FileNotFoundError:
        todo.append("ruff not run: sort imports and format the rewritten files by hand")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--dry-run", action="store_true", help="list the moves, change nothing")
    ap.add_argument("--no-commit-check", action="store_true", help="run on a dirty tree")
    args = ap.parse_args()
    if not args.no_commit_check and not args.dry_run:
        ensure_clean()
    if not args.dry_run and (ROOT / "streaming/models.py").exists():
        models_in_step()

    moved = move_files(args.dry_run)
    if args.dry_run:
        return
    # modules moved on an earlier run still need their references rewritten (idempotence)
    all_moves = dict(moved)
    MOVED_FROM.update({new: old for old, new in moved.items()})
    modmap = build_module_map(all_moves)
    symbols: dict[tuple[str, str], str] = {}
    touched: list[str] = []
    scaffold()
    split_files: list[str] = []
    for spec in SPLITS:
        split_files += split_module(spec, symbols)
    for spec in URL_SPLITS:
        touched += split_urls(spec)
    touched += install_apps()
    rw = Rewriter(modmap, symbols)
    touched += rewrite_all(rw)
    touched += write_docs()
    touched += import_linter_roots()
    for path, text in [(MIGRATION_TEST_PATH, MIGRATION_TEST)]:
        if (ROOT / "displays/models.py").exists() and write_new(path, text):
            touched.append(path)
    ruff(touched + split_files + [n for n in moved.values()], split_files)
    touched += write_migrations()
    sh("git", "add", "-A", ".")

    scan = leftovers(sorted(modmap))
    if changes or scan != []:
        body = ["# Relayout: what a person still has to do", ""]
        body += ["Written by `scripts/relayout.py`; delete this file once each item is done.", ""]
        body += ["## Choices to review", ""] + [f"- {t}" for t in KNOWN_CHOICES]
        body += ["", "## Imports across the new boundaries", ""]
        body += [f"- {t}" for t in boundary_report()] or ["- none"]
        body += ["", "## Not rewritten automatically", ""]
        body += [f"- {t}" for t in todo + scan] or ["- nothing"]
        if changes:
            (ROOT / TODO_FILE).write_text("\n".join(body) + "\n")
            sh("git", "add", TODO_FILE)
    for line in changes or ["nothing to do: the tree has the new layout already"]:
        say(f"relayout: {line}")
    if todo or scan:
        say(f"relayout: {len(todo) + len(scan)} items for a person, see {TODO_FILE}")


if __name__ == "__main__":
    main()
