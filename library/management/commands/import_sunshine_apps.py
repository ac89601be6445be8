"""Import a Sunshine-style `apps.json` (and its cover images) into this host's catalog.

Apps are merged by name (an app of the same name is replaced) unless `--replace` swaps the
whole catalog. Each `image-path` that decodes as an image is re-encoded into our covers dir;
one that does not is dropped with a warning, so an import never leaves a broken reference.
An entry that asks to run elevated (itself or a prep step) is imported with `elevated` off and
one warning naming the app and why: this host never runs an app with more rights than its own.
"""

from __future__ import annotations

import json
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from games.appfields import ELEVATED_REASON
from library import app_input, catalog, covers, imaging


class Command(BaseCommand):
    help = "Import a Sunshine apps.json and its covers so the catalog need not be retyped."

    def add_arguments(self, parser):
        parser.add_argument("apps_json", help="path of the Sunshine apps.json")
        parser.add_argument(
            "--covers-dir",
            action="append",
            default=[],
            help="where relative image paths live (default: next to apps.json and its covers/)",
        )
        parser.add_argument("--replace", action="store_true", help="replace the whole catalog")

    def handle(self, *args, **options):
        source = Path(options["apps_json"]).expanduser()
        try:
            doc = json.loads(source.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, ValueError) as exc:
            raise CommandError(f"cannot read {source}: {exc}") from None
        if not isinstance(doc, dict) or not isinstance(doc.get("apps", []), list):
            raise CommandError(f"{source} is not an apps.json (no `apps` array)")
        search = [Path(d).expanduser() for d in options["covers_dir"]]
        search += [source.parent, source.parent / "covers"]
        imported = []
        for n, raw in enumerate(doc.get("apps", [])):
            if not isinstance(raw, dict):
                self.stderr.write(f"skipping apps[{n}]: not an object")
                continue
            app = catalog.normalize(raw)
            if _drop_elevated(app):
                self.stderr.write(
                    f"apps[{n}] ({app.get('name')!r}): imported with elevated off: "
                    f"{ELEVATED_REASON}"
                )
            app["image-path"] = self._cover(app.get("image-path"), search, n)
            if not app["image-path"]:
                del app["image-path"]
            try:
                _index, clean = app_input.clean({**app, "index": -1})
            except app_input.AppInputError as exc:
                self.stderr.write(f"skipping apps[{n}] ({raw.get('name')!r}): {exc}")
                continue
            imported.append(clean)
        env = doc.get("env") if isinstance(doc.get("env"), dict) else {}
        env = {str(k): str(v) for k, v in env.items()}
        try:
            current = {"env": {}, "apps": []} if options["replace"] else catalog.load_document()
        except catalog.CatalogBroken as exc:
            raise CommandError(f"{exc}; fix it or use --replace") from None
        names = {a["name"] for a in imported}
        apps = [a for a in current["apps"] if a.get("name") not in names] + imported
        apps.sort(key=lambda a: str(a.get("name", "")).encode("utf-8"))
        catalog.replace_document({"env": {**current.get("env", {}), **env}, "apps": apps})
        self.stdout.write(f"imported {len(imported)} apps into {catalog.conf.apps_file()}")

    def _cover(self, image, search: list[Path], n: int) -> str:
        if not isinstance(image, str) or not image.strip():
            return ""
        path = Path(image).expanduser()
        candidates = [path] if path.is_absolute() else [d / path for d in search]
        for candidate in candidates:
            try:
                data = candidate.read_bytes()
            except OSError:
                continue
            try:
                png = imaging.to_png(data)
            except imaging.NotAnImage:
                break
            try:
                target = covers.cover_path(covers.check_key(f"imported-{n}-{candidate.stem}"))
            except covers.CoverError:
                target = covers.cover_path(f"imported-{n}")
            target.parent.mkdir(parents=True, exist_ok=True)
            covers.atomic_write(target, png, mode=0o644)
            return str(target)
        self.stderr.write(f"apps[{n}]: image {image!r} not found or not an image; dropped")
        return ""


def _drop_elevated(app: dict) -> bool:
    """Turn `elevated` off on the entry and its prep steps; True when any was on."""
    was = bool(app.pop("elevated", False))
    steps = app.get("prep-cmd")
    if isinstance(steps, list):
        for step in steps:
            if isinstance(step, dict) and "elevated" in step:
                was = bool(step.pop("elevated")) or was
    return was
