"""The host's own OpenAPI document matches every answer the host gives.

In process, for every operation of both APIs, from the document `/api/schema?format=json`
serves: no credentials, a wrong token, a credential without the route's scope, malformed,
wrong-type, wrong-content-type, empty and oversized bodies, unknown and hostile path values,
bad query values, and the happy path with a body built from the request schema (or its
example). Each answer must be below 500, its status documented for that operation, and its
JSON body valid against the documented schema. The same run with Redis out of reach adds:
a 503 carries Retry-After.

A fixed list of cases, no randomness: a failure names the operation, the case and the status.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from django.test import Client

from tests.conftest import basic
from tests.support import openapi_check

MGMT_TOKEN = "c" * 64
PLUGIN_TOKEN = "d" * 64
WRONG_TOKEN = "e" * 64
BODY_METHODS = {"post", "put", "patch"}
# The SSE stream never ends on a request it accepts: only the cases it refuses are sent.
STREAMING = {("get", "/api/v1/events")}
UNKNOWN = {"integer": "987654321", "string": "zz-unknown"}
HOSTILE_PATH = ["x" * 300, "..%2F..", "%E2%80%AE%00"]
HOSTILE_QUERY = ["abc", "-1", "9" * 30, "", "x\x00y", "1.5"]
# With Redis out of reach the malformed-input cases add nothing (they fail before any Redis
# call, as with it up); the credential and happy-path cases reach the code that needs it.
REDIS_DOWN_CASES = ("no credentials", "bad credential", "wrong scope", "happy")


@dataclass
class Case:
    label: str
    method: str
    path: str
    headers: dict = field(default_factory=dict)
    body: bytes | None = None
    content_type: str = "application/json"
    query: dict = field(default_factory=dict)
    reset_throttle: bool = False


@dataclass
class Finding:
    operation: str
    case: str
    status: int
    problem: str
    detail: str = ""

    def __str__(self) -> str:
        return f"{self.operation} [{self.case}] {self.status}: {self.problem} {self.detail}"


@pytest.fixture
def hostile_host(db, redis_db, restore_config, monkeypatch, settings):
    """The in-process host with every kind of credential the cases need."""
    from access import credentials, tokens
    from console import tokens as scoped

    monkeypatch.setenv("HOST_MGMT_TOKEN", MGMT_TOKEN)
    monkeypatch.setenv("HOST_PLUGIN_TOKEN", PLUGIN_TOKEN)
    monkeypatch.delenv("HOST_SUPERVISOR_PID", raising=False)
    # Queued tasks (the library rescan) run in this process, as Celery's test mode does: no
    # worker here, and a publish to an absent broker retries for seconds before giving up.
    from hostmgmt.celery import app

    eager = app.conf.task_always_eager
    app.conf.task_always_eager = True
    tokens._cache.clear()
    credentials.set_credentials("admin", "s3cret")
    creds = {
        "v1": {"HTTP_AUTHORIZATION": f"Bearer {MGMT_TOKEN}"},
        "v1_wrong": [{"HTTP_AUTHORIZATION": f"Bearer {PLUGIN_TOKEN}"}],
        "v1_bad": [{"HTTP_AUTHORIZATION": f"Bearer {WRONG_TOKEN}"},
                   {"HTTP_AUTHORIZATION": "Bearer not-a-token"}],
        "admin": {"HTTP_AUTHORIZATION": basic("admin", "s3cret")},
        "admin_wrong": [
            {"HTTP_AUTHORIZATION": f"Bearer {scoped.mint('fuzz-pair', ['clients:pair'])}"},
            {"HTTP_AUTHORIZATION": f"Bearer {scoped.mint('fuzz-logs', ['logs:get'])}"},
        ],
        "admin_bad": [{"HTTP_AUTHORIZATION": basic("admin", "wrong")},
                      {"HTTP_AUTHORIZATION": f"Bearer {WRONG_TOKEN}"}],
    }  # fmt: skip
    creds["known"] = _seed()
    yield creds
    app.conf.task_always_eager = eager
    tokens._cache.clear()


@pytest.fixture(scope="module")
def spec() -> dict:
    """The document as `/api/schema?format=json` serves it (generated once: seconds)."""
    return load_spec(Client())


def _seed() -> dict[str, dict[str, str]]:
    """Path values that name something that exists, so the happy path reaches the id routes
    too (`/api/apps/{index}`: the app the POST example creates just before)."""
    from django.utils import timezone

    from access import api_tokens
    from displays import services as displays
    from library import services as library
    from streaming import history

    history.record_session(t_start=timezone.now(), app_name="Fuzz")
    api_tokens.mint("fuzz-revoke", ["logs:get"])
    return {
        "/api/v1/library/custom/{entry_id}": {
            "entry_id": library.create_custom({"title": "Fuzz"})["id"]
        },
        "/api/v1/display/presets/{preset_id}": {
            "preset_id": displays.create_preset({"name": "Seed", "fields": {}})["id"]
        },
        "/api/sessions/{record_id}": {"record_id": str(history.recent(1)[0].pk)},
        "/api/tokens/{name}": {"name": "fuzz-revoke"},
        "/api/v1/library/scanners/{scanner}": {"scanner": "steam"},
        "/api/apps/{index}": {"index": "0"},
        "/api/covers/{index}": {"index": "0"},
    }


def load_spec(client: Client) -> dict:
    r = client.get("/api/schema", {"format": "json"})
    assert r.status_code == 200, r.status_code
    return json.loads(r.content)


METHOD_ORDER = ("get", "post", "put", "patch", "delete")  # a known id is deleted last


def operations(spec: dict):
    for path in sorted(spec["paths"]):
        for method in METHOD_ORDER:
            if method in spec["paths"][path]:
                yield path, method, spec["paths"][path][method]


def _fill(path: str, op: dict, override: dict | None = None) -> str:
    for param in op.get("parameters", []):
        if param["in"] == "path":
            name = param["name"]
            value = (override or {}).get(name) or UNKNOWN.get(
                param.get("schema", {}).get("type", "string"), "zz-unknown"
            )
            path = path.replace("{" + name + "}", value)
    return path


def _bodies(op: dict, spec: dict) -> list[tuple[str, bytes]]:
    """The happy-path bodies: each documented example, then one built from the schema."""
    content = (op.get("requestBody") or {}).get("content", {}).get("application/json")
    if content is None:
        return []
    out = [
        (f"example {name}", json.dumps(ex["value"]).encode())
        for name, ex in sorted(content.get("examples", {}).items())
        if "value" in ex
    ]
    built = openapi_check.sample(content["schema"], spec)
    out.append(("schema sample", json.dumps(built).encode()))
    return out


def cases(path: str, method: str, op: dict, spec: dict, creds: dict) -> list[Case]:
    api = "v1" if path.startswith("/api/v1/") else "admin"
    good = creds[api]
    url = _fill(path, op)
    streaming = (method, path) in STREAMING
    out = [Case("no credentials", method, url)]
    if op.get("security"):
        out += [Case(f"bad credential {i}", method, url, h, reset_throttle=True)
                for i, h in enumerate(creds[f"{api}_bad"])]  # fmt: skip
        if not streaming:
            out += [Case(f"wrong scope {i}", method, url, h)
                    for i, h in enumerate(creds[f"{api}_wrong"])]  # fmt: skip
    if not streaming:
        out.append(Case("happy, no body", method, url, good))
    known = creds["known"].get(path)
    if known:
        url_known = _fill(path, op, known)
        out.append(Case("happy, known id", method, url_known, good))
        if method in BODY_METHODS:
            out += [Case(f"happy, known id, {label}", method, url_known, good, body)
                    for label, body in _bodies(op, spec)]  # fmt: skip
    if method in BODY_METHODS:
        limit = 4 * 1024 * 1024 if api == "v1" else 1024 * 1024
        out += [Case(f"happy, {label}", method, url, good, body)
                for label, body in _bodies(op, spec)]  # fmt: skip
        out += [
            Case("malformed JSON", method, url, good, b'{"a": '),
            Case("JSON array", method, url, good, b"[]"),
            Case("JSON string", method, url, good, b'"x"'),
            Case("JSON null", method, url, good, b"null"),
            Case(
                "wrong field types",
                method,
                url,
                good,
                b'{"name": 1, "enabled": "yes", '
                b'"slot": -1, "hooks": 3, "pin": [], "uuid": {}, "version": "x"}',
            ),
            Case("text/plain", method, url, good, b"hello", "text/plain"),
            Case("form", method, url, good, b"a=1", "application/x-www-form-urlencoded"),
            Case("oversized", method, url, good, b'"' + b"x" * (limit + 16) + b'"'),
        ]
    for param in op.get("parameters", []):
        name, where = param["name"], param["in"]
        if where == "path":
            out += [Case(f"path {name}={v[:12]!r}", method, _fill(path, op, {name: v}), good)
                    for v in HOSTILE_PATH]  # fmt: skip
        elif where == "query":
            out += [Case(f"query {name}={v[:12]!r}", method, url, good, query={name: v})
                    for v in HOSTILE_QUERY if not (streaming and v in ("", "9" * 30))]  # fmt: skip
    return out


def _documented(op: dict, status: int) -> dict | None:
    responses = op.get("responses", {})
    return (
        responses.get(str(status))
        or responses.get(f"{status // 100}XX")
        or responses.get("default")
    )


def send(client: Client, case: Case):
    kwargs = dict(case.headers)
    if case.query:
        from urllib.parse import urlencode

        target = f"{case.path}?{urlencode(case.query)}"
    else:
        target = case.path
    call = getattr(client, case.method)
    if case.body is not None:
        return call(target, data=case.body, content_type=case.content_type, **kwargs)
    return call(target, **kwargs)


def check(op_name: str, op: dict, case: Case, response, spec: dict, redis_down: bool):
    status = response.status_code
    found: list[Finding] = []

    def flag(problem: str):
        found.append(Finding(op_name, case.label, status, problem))

    if status >= 500 and not (redis_down and status == 503):
        flag("server error: " + response.content[:160].decode("utf-8", "replace"))
    if status == 503 and b"Redis" in response.content and not response.get("Retry-After"):
        flag("503 without Retry-After")
    documented = _documented(op, status)
    if documented is None:
        flag("status not documented")
        found[-1].detail = response.content[:120].decode("utf-8", "replace")
        return found
    content = documented.get("content") or {}
    media = (response.get("Content-Type") or "").split(";")[0].strip()
    body = response.content if not getattr(response, "streaming", False) else b""
    if not body:
        return found
    if not content:
        flag("a body where the document says there is none")
        return found
    if media not in content:
        flag(f"content type {media!r} not documented ({sorted(content)})")
        return found
    schema = content[media].get("schema")
    if media == "application/json" and schema:
        try:
            value = json.loads(body)
        except ValueError:
            flag("body is not JSON")
            return found
        for problem in openapi_check.errors(value, schema, spec):
            flag(f"body does not match the schema: {problem}")
    return found


@dataclass
class Run:
    findings: list[Finding]
    sent: int
    answered_2xx: set[str]


def fuzz(spec: dict, creds: dict, redis_down: bool = False) -> Run:
    from access import throttle

    client = Client()
    findings: list[Finding] = []
    sent = 0
    ok: set[str] = set()
    for path, method, op in operations(spec):
        op_name = f"{method.upper()} {path}"
        for case in cases(path, method, op, spec, creds):
            if redis_down and not case.label.startswith(REDIS_DOWN_CASES):
                continue
            response = send(client, case)
            sent += 1
            if 200 <= response.status_code < 300:
                ok.add(op_name)
            if case.reset_throttle:
                throttle.reset()
            findings += check(op_name, op, case, response, spec, redis_down)
    return Run(findings, sent, ok)


def summary(findings: list[Finding], spec: dict) -> str:
    ops = {f"{m.upper()} {p}" for p, m, _ in operations(spec)}
    undocumented = {f.operation for f in findings if f.problem == "status not documented"}
    errors5xx = [f for f in findings if f.problem.startswith("server error")]
    mismatch = {f.operation for f in findings if "schema" in f.problem or "content" in f.problem}
    v1 = [o for o in ops if "/api/v1/" in o]
    return (
        f"undocumented status: {len([o for o in undocumented if '/api/v1/' in o])} of {len(v1)}"
        f" management and {len([o for o in undocumented if '/api/v1/' not in o])} of "
        f"{len(ops) - len(v1)} admin operations; server errors: {len(errors5xx)} answers on "
        f"{len({f.operation for f in errors5xx})} operations; schema mismatches on "
        f"{len(mismatch)} operations"
    )


def _report(run: Run, spec: dict) -> str:
    findings = run.findings
    total = len(list(operations(spec)))
    never = sorted({f"{m.upper()} {p}" for p, m, _ in operations(spec)} - run.answered_2xx)
    lines = [
        summary(findings, spec),
        f"{run.sent} requests; {len(run.answered_2xx)} of {total} operations answered 2xx "
        f"at least once; never: {', '.join(never)}",
    ]
    if os.environ.get("API_CONFORMANCE_REPORT"):  # the whole list, for counting by hand
        Path(os.environ["API_CONFORMANCE_REPORT"]).write_text("\n".join(map(str, findings)))
    lines += [str(f) for f in findings[:60]]
    return "\n".join(lines)


def test_every_answer_is_documented_and_matches_its_schema(hostile_host, spec):
    run = fuzz(spec, hostile_host)
    print(_report(run, spec))
    assert run.sent > 800  # every operation got its cases
    # The happy path reaches all but the routes that cannot succeed in process (Windows-only,
    # restart without the supervisor, devices that are not waiting, art, the stream): 74 of 88.
    assert len(run.answered_2xx) >= 70, _report(run, spec)
    assert run.findings == [], _report(run, spec)


def test_with_redis_out_of_reach_every_answer_is_documented(hostile_host, spec, settings, tmp_path):
    settings.REDIS_URL = f"unix://{tmp_path}/no-redis.sock"
    run = fuzz(spec, hostile_host, redis_down=True)
    print(_report(run, spec))
    assert run.findings == [], _report(run, spec)


def test_the_checker_catches_an_undocumented_status_and_a_wrong_body(spec):
    """The check itself can fail: a 418 and a body of the wrong shape are both reported."""
    op = spec["paths"]["/api/v1/health"]["get"]

    class Fake:
        status_code = 418
        content = b"{}"
        streaming = False

        def get(self, key, default=None):
            return "application/json" if key == "Content-Type" else default

    case = Case("fake", "get", "/api/v1/health")
    assert [f.problem for f in check("GET /api/v1/health", op, case, Fake(), spec, False)] == [
        "status not documented"
    ]
    Fake.status_code, Fake.content = 200, b'{"status": 5}'
    problems = check("GET /api/v1/health", op, case, Fake(), spec, False)
    assert problems and all("schema" in f.problem for f in problems)


def test_the_event_stream_with_redis_out_of_reach_is_a_documented_503(
    hostile_host, spec, settings, tmp_path
):
    """The one route the cases above cannot open (it streams): refused before streaming."""
    from asgiref.sync import async_to_sync
    from django.test import AsyncClient

    settings.REDIS_URL = f"unix://{tmp_path}/no-redis.sock"
    response = async_to_sync(AsyncClient().get)("/api/v1/events", headers={
        "Authorization": f"Bearer {MGMT_TOKEN}"})  # fmt: skip
    op = spec["paths"]["/api/v1/events"]["get"]
    case = Case("redis down", "get", "/api/v1/events")
    assert response.status_code == 503 and response["Retry-After"] == "5"
    assert check("GET /api/v1/events", op, case, response, spec, True) == []


def test_redis_out_of_reach_is_a_503_with_retry_after_on_both_apis(
    hostile_host, settings, tmp_path
):
    from access.throttle import ThrottleUnavailable
    from apikit.errors import REDIS_DOWN

    settings.REDIS_URL = f"unix://{tmp_path}/no-redis.sock"
    client = Client()
    v1 = client.get("/api/v1/native/pending", **hostile_host["v1"])
    assert (v1.status_code, v1["Retry-After"], v1.json()) == (503, "5", {"error": REDIS_DOWN})
    admin = client.generic("POST", "/api/apps/close", **hostile_host["admin"])  # no body: all
    assert (admin.status_code, admin["Retry-After"]) == (503, "5")
    # the admin API's credentials meet the login throttle first, which says why it refuses
    assert admin.json() == {
        "status": False,
        "status_code": 503,
        "error": ThrottleUnavailable().message,
    }
