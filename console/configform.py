"""The /config page's model: every key of the schema grouped as the spec groups them, with its
current file value, default, rule and restart marker; and the form's submit handling.

Validation and persistence go through the config store and service the APIs use, so the page
can never accept what `POST /api/config` would refuse.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from host import config_checks as checks
from host import config_service as service
from hostconfig import effects, store
from hostconfig.schema import KEYS
from media import encoder_options, encoders

SECRET_MASK = "********"
GROUP_TITLES = {
    "network": "Network and scheduling",
    "access": "Access, pairing and webhooks",
    "security": "Security",
    "video": "Video and capture",
    "headless": "Headless and virtual displays",
    "input": "Input",
    "audio": "Audio processing",
    "general": "General",
}


@dataclass
class Field:
    name: str
    type: str
    default: Any
    rule: str
    restart: bool
    help: str
    choices: tuple[str, ...]
    secret: bool
    value: str = ""
    error: str = ""
    mark: str = ""  # "effect" (a test proves it acts) or "refused" (only the default)
    mark_text: str = ""
    reach: str = ""  # encoder keys: which encoders the key reaches, and which of them open here
    refused: str = ""  # why only the default is accepted: the control is disabled
    refused_values: dict[str, str] = field(default_factory=dict)  # option -> why (disabled)

    @property
    def options(self) -> list[tuple[str, str]]:
        """A select's (value, why refused or "") pairs: the choices, then the refused values."""
        values = ["true", "false"] if self.type == "bool" else list(self.choices)
        values += [v for v in self.refused_values if v not in values]
        return [(v, self.refused_values.get(v, "")) for v in values]


@dataclass
class Group:
    id: str
    title: str
    fields: list[Field] = field(default_factory=list)


def _rule(spec) -> str:
    if spec.choices:
        rule = "one of " + ", ".join(spec.choices)
        if spec.refused:  # known values this host cannot do: the operator sees why up front
            rule += "; not supported on this host: " + ", ".join(spec.refused)
        return rule
    if spec.min is not None or spec.max is not None:
        return spec.range_text()
    return {"bool": "true or false", "list": "comma-separated list", "url": "http(s) URL"}.get(
        spec.type, ""
    )


def _mark_text(mark: str, why: str) -> str:
    """The one-line marker beside a key: what the host does with it."""
    if mark == "effect":
        return "effect: changes what the host does (tested: " + why.split("::")[-1] + ")"
    if mark == "refused":
        return "refused: " + why + " (only the default is accepted)"
    return "unclassified"


def _reach(name: str) -> str:
    """For an encoder key: the encoders it reaches and which of those opened on this host
    (a key for an encoder not in use is kept and acts once that encoder opens)."""
    reached = encoder_options.reached_by(name)
    if not reached:
        return ""
    try:
        table = encoders.available()
    except Exception:  # the page must render without the probe
        table = {}
    here = [e for e in reached if table.get(encoders.backend_of(e), {}).get(_codec_of(e))]
    return (f"reaches {', '.join(reached)}; opens here: "
            f"{', '.join(here) if here else 'none of them (kept, no effect now)'}")  # fmt: skip


def _codec_of(encoder: str) -> str:
    from media.encoder import CODEC_OF  # heavy: media.encoder loads PyAV and numpy

    return CODEC_OF.get(encoder, "h264")


def _shown(spec, raw: str | None) -> str:
    if raw is None:
        return ""
    if spec.secret:
        return SECRET_MASK if raw else ""
    if spec.type in ("bool", "enum") and raw.strip():
        # Selects offer canonical spellings only: `yes` shows (and round-trips) as `true`.
        try:
            value = spec.parse(raw)
        except ValueError:
            return raw
        return "" if value is None else spec.render(value)
    return raw


def groups(submitted: dict[str, str] | None = None, errors: dict[str, str] | None = None):
    raw = store.read_raw()
    out: dict[str, Group] = {}
    for name, spec in KEYS.items():
        if spec.file_only:
            continue  # tokens have their own page; profiles and the compat switch are file-only
        group = out.setdefault(
            spec.group, Group(spec.group, GROUP_TITLES.get(spec.group, spec.group.title()))
        )
        value = _shown(spec, raw.get(name))
        mark, why = effects.marker(name)
        if submitted is not None and name in submitted:
            value = submitted[name]
        if spec.refused_all:
            value = ""  # only the default is accepted; the control shows nothing else
        group.fields.append(
            Field(
                name=name,
                type=spec.type,
                # shown as the operator would write it in host.conf ("true", not "True")
                default=spec.render(spec.default) or None,
                rule=_rule(spec),
                restart=spec.restart,
                help=spec.help,
                choices=spec.choices,
                secret=spec.secret,
                value=value,
                error=(errors or {}).get(name, ""),
                mark=mark,
                mark_text=_mark_text(mark, why),
                reach=_reach(name),
                refused=spec.refused_all,
                refused_values=effects.refused_values([name]).get(name, {}),
            )
        )
    order = list(GROUP_TITLES)
    return sorted(out.values(), key=lambda g: order.index(g.id) if g.id in order else len(order))


def changes(form) -> dict[str, str]:
    """The keys whose submitted text differs from what the page showed."""
    raw = store.read_raw()
    changed = {}
    for name, spec in KEYS.items():
        if spec.file_only or name not in form:
            continue
        # Only spaces are trimmed: any other blank or break reaches the validator and is refused.
        text = form.get(name, "").strip(" ")
        if text != _shown(spec, raw.get(name)):
            changed[name] = text
    return changed


def save(changed: dict[str, str]) -> dict:
    """Validate then persist; raises store.ConfigError with per-key messages."""
    updates: dict[str, Any] = {k: (None if v == "" else v) for k, v in changed.items()}
    updates = {k: v for k, v in updates.items() if not (KEYS[k].secret and v == SECRET_MASK)}
    if not updates:
        return {"restart_required": False, "saved": 0}
    checks.at_write(store.validate(updates))  # per-key errors for the form
    result = service.admin_post(updates)
    return {"restart_required": result.get("restart_required", False), "saved": len(updates)}
