"""The guard: every configuration key (pattern keys and both APIs' forms included) either acts,
with a registered test that exists, or refuses every value but its default with a reason."""

from __future__ import annotations

import ast
from functools import cache
from pathlib import Path

import pytest

from hostconfig import effects, v1form
from hostconfig.schema import KEYS, key

pytestmark = pytest.mark.django_db
ROOT = Path(__file__).resolve().parents[2]
ALL_NAMES = list(KEYS) + list(effects.PATTERN_SAMPLES)


@cache
def _test_names(path: str) -> frozenset[str]:
    tree = ast.parse((ROOT / path).read_text())
    return frozenset(
        n.name for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))
    )


@pytest.mark.parametrize("name", ALL_NAMES)
def test_every_key_acts_or_is_refused(name):
    spec = key(name)
    assert spec is not None, name
    registered = effects.label(name) in effects.EFFECTS
    assert registered or spec.refused_all, f"{name}: stored and ignored (no effect, no refusal)"
    assert not (registered and spec.refused_all), f"{name}: both an effect and a refusal"


def test_every_v1_form_field_is_a_classified_key():
    for dotted, name in v1form.FIELDS.items():
        assert name in KEYS, dotted
        assert effects.marker(name)[0] in ("effect", "refused"), dotted


@pytest.mark.parametrize("label", sorted(effects.EFFECTS))
def test_every_registered_effect_test_exists(label):
    node = effects.EFFECTS[label]
    path, _, func = node.partition("::")
    assert (ROOT / path).is_file(), node
    assert func.split("[")[0] in _test_names(path), node
    known = {effects.label(n) for n in ALL_NAMES}
    assert label in known, f"{label}: registered but not a key of the schema"


def _non_default(spec):
    if spec.type == "bool":
        return not spec.default if spec.default is not None else True
    if spec.type == "enum":
        return next(c for c in spec.choices if c != spec.default)
    if spec.type in ("int", "float"):
        return spec.max if spec.max != spec.default else spec.min
    return "something"


REFUSED = [n for n in ALL_NAMES if key(n).refused_all]


@pytest.mark.parametrize("name", REFUSED)
def test_refused_keys_say_why_in_both_apis_and_take_the_default(admin, v1, state, name):
    spec = key(name)
    value = _non_default(spec)
    if not spec.file_only:
        r = admin.post("/api/config", {name: value}, format="json")
        assert r.status_code == 400, (name, r.content)
        assert name in r.json()["error"] and spec.refused_all in r.json()["error"]
        if spec.default is not None:
            r = admin.post("/api/config", {name: spec.default}, format="json")
            assert r.status_code == 200, (name, r.content)
    fields = {n: d for d, n in v1form.FIELDS.items()}
    if name in fields:
        section, _, leaf = fields[name].rpartition(".")
        body = {section: {leaf: value}} if section else {leaf: value}
        r = v1.put("/api/v1/host/config", body, format="json")
        assert r.status_code == 400, (name, r.content)
        errors = {f["field"]: f for f in r.json()["fields"]}
        assert fields[name] in errors and spec.refused_all in str(errors[fields[name]])
    # A hand-edited file value other than the default reads as the default.
    (state / "host.conf").write_text(f"{name} = {spec.render(value)}\n")
    from hostconfig import store

    assert store.get(name) == spec.default
    assert spec.refused_all


def test_the_console_marks_each_key_effect_or_refused(state, admin):
    from django.test import Client

    from access import credentials

    credentials.set_credentials("admin", "pw-for-tests")
    client = Client()
    assert client.post("/login", {"username": "admin", "password": "pw-for-tests"}).status_code
    html = client.get("/config").content.decode()
    assert 'data-key="perf"' in html
    assert 'id="mark-perf" class="mark refused"' in html
    assert 'id="mark-port" class="mark effect"' in html
    assert 'id="mark-min_log_level" class="mark effect"' in html
    assert html.count('id="mark-') == sum(1 for s in KEYS.values() if not s.file_only)
    assert "mark unclassified" not in html and "tested: test_" in html


def test_display_policy_enforced_lists_only_what_acts_and_refuses_the_rest(v1, state):
    from displays import policy

    state_ = v1.get("/api/v1/display/settings").json()
    assert set(state_["enforced"]) == set(policy.ENFORCED)
    assert not set(state_["enforced"]) & set(state_["unsupported"])
    assert set(state_["unsupported"]) == {"game_session", "ddc_power_off", "pnp_disable_monitors"}
    # Every option of the policy is either enforced or reported unsupported.
    assert set(policy.AXES) | set(policy.ORTHOGONAL) == set(policy.ENFORCED) | set(
        policy.UNSUPPORTED
    )
    for body, field in (
        ({"ddc_power_off": True}, "ddc_power_off"),
        ({"pnp_disable_monitors": True}, "pnp_disable_monitors"),
        ({"game_session": "dedicated"}, "game_session"),
    ):
        r = v1.put("/api/v1/display/settings", body, format="json")
        assert r.status_code == 400, r.content
        assert "not supported on this host" in r.content.decode() and field in r.content.decode()
    r = v1.post(
        "/api/v1/display/presets",
        {"name": "couch", "fields": {"game_session": "dedicated"}},
        format="json",
    )
    assert r.status_code == 400 and "not supported on this host" in r.content.decode()
    ok = v1.put("/api/v1/display/settings", {"ddc_power_off": False}, format="json")
    assert ok.status_code == 200, ok.content


def test_the_docs_table_says_the_same_for_every_key():
    text = (ROOT / "docs/host-state.md").read_text()
    for name in ALL_NAMES:
        mark, _ = effects.marker(name)
        row = next(
            (ln for ln in text.splitlines() if ln.startswith(f"| `{effects.label(name)}` |")), ""
        )
        assert row and f"| {mark}: " in row, f"{name}: no docs/host-state.md row saying {mark}"


def test_both_apis_say_per_key_what_is_refused_and_why(admin, v1, state):
    """`refused` and `refused_values` beside the documented fields, keyed as each API keys."""
    got = admin.get("/api/config").json()
    for name in KEYS:
        spec = key(name)
        assert name in (got["file_only"] if spec.file_only else got)  # documented fields kept
        if spec.refused_all:
            assert got["refused"][name] == spec.refused_all, name
        else:
            assert name not in got["refused"], name
    assert "perf" in got["refused"] and "port" not in got["refused"]
    assert got["refused_values"]["capture_method"]["kms"].startswith("this build has no")
    assert set(got["refused_values"]["capture_method"]) == {"kms", "nvfbc"}
    assert "perf" not in got["refused_values"]
    # The value an API refuses at write is the value it lists.
    r = admin.post("/api/config", {"capture_method": "kms"}, format="json")
    assert (
        r.status_code == 400 and got["refused_values"]["capture_method"]["kms"] in r.json()["error"]
    )

    form = v1.get("/api/v1/host/config").json()
    assert set(form) >= {"settings", "configured", "requires_restart", "env_path"}
    assert form["refused"]["general.perf"] == KEYS["perf"].refused_all
    assert "general.host_name" not in form["refused"]
    by_key = {n: d for d, n in v1form.FIELDS.items()}
    for name, dotted in by_key.items():
        assert (dotted in form["refused"]) == bool(KEYS[name].refused_all), dotted
    assert (
        form["refused_values"]["audio_video.capture_method"]
        == got["refused_values"]["capture_method"]
    )
