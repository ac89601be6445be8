"""docs/gaps.md lists every `# GAP` marker of the product code, and only live ones."""

from __future__ import annotations

import os
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
MARKER = re.compile(r"#\s*GAP\b:?\s*(.*)")
SKIP_DIRS = {"tests", "migrations", "node_modules", "__pycache__"}


def markers(root: Path = ROOT) -> list[tuple[str, str]]:
    """(dotted module, text after the marker) for each `# GAP` marker outside tests."""
    found = []
    for folder, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if d not in SKIP_DIRS and not d.startswith("."))
        for name in sorted(files):
            if not name.endswith(".py"):
                continue
            path = Path(folder) / name
            module = ".".join(path.relative_to(root).with_suffix("").parts)
            module = module.removesuffix(".__init__")
            for line in path.read_text(encoding="utf-8").splitlines():
                match = MARKER.search(line)
                if match:
                    found.append((module, match.group(1).strip()))
    return found


def rows(doc: str) -> list[tuple[str, str]]:
    """(module, marker phrase) of each row of the gaps table."""
    out = []
    for line in doc.splitlines():
        if line.startswith("| `"):
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            out.append((cells[0].strip("`"), cells[2].strip("`")))
    return out


def unlisted(found, listed) -> list[tuple[str, str]]:
    return [(m, t) for m, t in found if not any(m == lm and p in t for lm, p in listed)]


def stale(found, listed) -> list[tuple[str, str]]:
    return [(lm, p) for lm, p in listed if not any(m == lm and p in t for m, t in found)]


def _doc_rows():
    return rows((ROOT / "docs" / "gaps.md").read_text(encoding="utf-8"))


def test_every_gap_marker_is_listed_in_the_docs():
    found = markers()
    assert found, "the scan found no marker at all: is ROOT right?"
    assert unlisted(found, _doc_rows()) == []


def test_every_listed_gap_still_has_its_marker():
    assert stale(markers(), _doc_rows()) == []


def test_each_listed_phrase_names_one_marker():
    found = markers()
    for module, phrase in _doc_rows():
        hits = [t for m, t in found if m == module and phrase in t]
        assert len(hits) == 1, (module, phrase, hits)


def test_a_new_marker_or_a_dropped_one_is_caught(tmp_path):
    pkg = tmp_path / "app" / "sub"
    pkg.mkdir(parents=True)
    (pkg / "mod.py").write_text("x = 1  # GAP: frobnication is not wired yet\n")
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_x.py").write_text(
        "# GAP: a test's own marker is not product code\n"
    )
    found = markers(tmp_path)
    assert found == [("app.sub.mod", "frobnication is not wired yet")]
    assert unlisted(found, []) == found
    assert unlisted(found, [("app.sub.other", "frobnication")]) == found
    assert unlisted(found, [("app.sub.mod", "frobnication is not")]) == []
    assert stale(found, [("app.sub.mod", "gone marker")]) == [("app.sub.mod", "gone marker")]
