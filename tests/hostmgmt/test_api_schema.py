"""`/api/schema` (behind `/api/docs`) lists every API route, hand-written ones included."""

from __future__ import annotations

import re

import pytest
import yaml
from django.test import Client
from django.urls import URLPattern, URLResolver, get_resolver

_NAMED_GROUP = re.compile(r"\(\?P<(\w+)>[^)]*\)")
_CONVERTER = re.compile(r"<(?:\w+:)?(\w+)>")


def _routes(resolver=None, prefix: str = ""):
    """Every URL of the URL map as an OpenAPI path template (`/api/tokens/{name}`)."""
    resolver = resolver or get_resolver()
    for entry in resolver.url_patterns:
        piece = str(entry.pattern).lstrip("^").rstrip("$")
        piece = _CONVERTER.sub(r"{\1}", _NAMED_GROUP.sub(r"{\1}", piece))
        if isinstance(entry, URLResolver):
            yield from _routes(entry, prefix + piece)
        elif isinstance(entry, URLPattern):
            yield "/" + prefix + piece


@pytest.fixture(scope="module")
def schema() -> dict:
    r = Client().get("/api/schema")  # what /api/docs loads (served as OpenAPI YAML)
    assert r.status_code == 200
    return yaml.safe_load(r.content)


def test_every_api_route_is_in_the_schema(schema):
    api_routes = {
        r for r in _routes() if r.startswith("/api/") and r not in ("/api/schema", "/api/docs")
    }
    assert "/api/v1/events" in api_routes and "/api/tokens/{name}" in api_routes  # sanity
    missing = sorted(api_routes - set(schema["paths"]))
    assert missing == []


def test_the_event_stream_is_described_with_its_parameters_and_media_type(schema):
    op = schema["paths"]["/api/v1/events"]["get"]
    params = {(p["in"], p["name"]): p for p in op["parameters"]}
    assert set(params) == {("query", "since"), ("query", "kinds"), ("header", "Last-Event-ID")}
    assert params[("query", "since")]["schema"] == {
        "type": "integer",
        "format": "int64",
        "minimum": 0,
    }
    assert "host.stopping" in params[("query", "kinds")]["description"]
    assert "stream.*" in params[("query", "kinds")]["description"]
    ok = op["responses"]["200"]
    assert list(ok["content"]) == ["text/event-stream"]
    assert ok["content"]["text/event-stream"]["example"].startswith("id: 42\nevent: ")
    assert {"400", "401", "403", "503"} <= set(op["responses"])
    assert op["security"] == [{"mgmtToken": []}]
    assert schema["components"]["securitySchemes"]["mgmtToken"]["scheme"] == "bearer"


def test_drf_routes_carry_their_api_security(schema):
    assert schema["paths"]["/api/v1/host/restart"]["post"]["security"] == [{"mgmtToken": []}]
    # The console's pages call these with the operator's login session (CSRF on writes).
    assert schema["paths"]["/api/v1/hooks"]["get"]["security"] == [
        {"mgmtToken": []},
        {"consoleSession": []},
    ]
    assert schema["paths"]["/api/csrf-token"]["get"]["security"] == [
        {"adminBasic": []},
        {"adminToken": []},
    ]
    schemes = schema["components"]["securitySchemes"]
    assert schemes["adminBasic"]["scheme"] == "basic"


def test_schema_is_valid_openapi(schema):
    from drf_spectacular.validation import validate_schema

    validate_schema(schema)


def test_swagger_page_is_served():
    r = Client().get("/api/docs")
    assert r.status_code == 200 and b"swagger" in r.content.lower()


def test_format_json_serves_json_and_yaml_stays_the_default():
    import json

    r = Client().get("/api/schema", {"format": "json"})
    assert r.status_code == 200 and r["Content-Type"].startswith("application/vnd.oai.openapi+json")
    assert json.loads(r.content)["openapi"].startswith("3.")
    r = Client().get("/api/schema", HTTP_ACCEPT="application/json")
    assert r["Content-Type"].startswith("application/json") and json.loads(r.content)["paths"]
    assert Client().get("/api/schema")["Content-Type"].startswith("application/vnd.oai.openapi")


def test_shared_statuses_carry_each_apis_error_body(schema):
    v1 = schema["paths"]["/api/v1/library/custom/{entry_id}"]["put"]["responses"]
    assert {"400", "401", "403", "404", "413", "415"} <= set(v1)
    assert v1["400"]["content"]["application/json"]["schema"] == {
        "$ref": "#/components/schemas/ManagementError"
    }
    admin = schema["paths"]["/api/tokens"]["post"]["responses"]
    assert {"400", "401", "403", "413", "429"} <= set(admin) and "415" not in admin
    assert admin["429"]["headers"]["Retry-After"]["schema"] == {"type": "integer"}
    assert admin["401"]["content"]["application/json"]["schema"] == {
        "$ref": "#/components/schemas/AdminError"
    }
    assert set(schema["paths"]["/api/v1/health"]["get"]["responses"]) == {"200"}
