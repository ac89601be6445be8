"""Domain errors (common/errors.py) as each API answers them: one handler, two bodies."""

from __future__ import annotations

import json

import pytest
from rest_framework.test import APIRequestFactory
from rest_framework.views import APIView

from common import errors
from console.tokens import TokenError
from console.updater import CheckRefused
from displays.machine import DisplayError
from displays.services import ServiceError
from media.gpus import PreferenceError
from native.ratelimit import Limited
from native.sessions import SessionError

CASES = [
    (errors.Invalid("bad thing"), 400),
    (errors.Forbidden("not you"), 403),
    (errors.NotFound("no such thing"), 404),
    (errors.Conflict("owned elsewhere"), 409),
    (errors.TooLarge("too big"), 413),
    (errors.Unsupported("send JSON"), 415),
    (errors.TooMany("slow down"), 429),
    (errors.Failed("could not be persisted"), 500),
    (errors.Unavailable("not now"), 503),
    (errors.DomainError("a teapot", status=418), 418),
    # the per-module classes that carry a status are domain errors too
    (ServiceError(404, "no custom preset with that id"), 404),
    (PreferenceError(500, "GPU preference could not be persisted"), 500),
    (TokenError("no token named 'x'", 404), 404),
    (CheckRefused(409, "update checks are disabled"), 409),
    (SessionError(503, "no display"), 503),
    (Limited("too many offers", 7), 429),
    (DisplayError(409, "display busy"), 409),
]


def answer(exc: Exception, path: str, view_attrs: dict | None = None):
    class Raising(APIView):
        authentication_classes: list = []
        permission_classes: list = []

        def get(self, request):
            raise exc

    for key, value in (view_attrs or {}).items():
        setattr(Raising, key, value)
    response = Raising.as_view()(APIRequestFactory().get(path))
    response.render()
    return response


@pytest.mark.parametrize("exc,status", CASES, ids=[type(c[0]).__name__ for c in CASES])
def test_each_domain_error_in_the_management_api_body(exc, status):
    r = answer(exc, "/api/v1/anything")
    assert r.status_code == status
    assert json.loads(r.content) == {"error": exc.message}


@pytest.mark.parametrize("exc,status", CASES, ids=[type(c[0]).__name__ for c in CASES])
def test_each_domain_error_in_the_admin_api_body(exc, status):
    r = answer(exc, "/api/anything")
    assert r.status_code == status
    assert json.loads(r.content) == {"status": False, "status_code": status, "error": exc.message}


def test_field_messages_go_with_a_400_under_v1_only():
    exc = errors.Invalid("invalid layout", fields={"positions.0.x": "must be an integer"})
    v1 = json.loads(answer(exc, "/api/v1/display/layout").content)
    assert v1 == {
        "error": "invalid layout",
        "fields": [{"field": "positions.0.x", "message": "must be an integer"}],
    }
    admin = json.loads(answer(exc, "/api/config").content)
    assert admin == {"status": False, "status_code": 400, "error": "invalid layout"}
    # a non-400 never lists fields (they describe a bad request body)
    odd = errors.Conflict("taken", fields={"name": "in use"})
    assert json.loads(answer(odd, "/api/v1/x").content) == {"error": "taken"}


def test_retry_after_becomes_a_header():
    r = answer(Limited("too many offers from this device", 7), "/api/v1/x")
    assert r.status_code == 429 and r["Retry-After"] == "7"
    assert "Retry-After" not in answer(errors.TooMany("slow down"), "/api/v1/x")


def test_a_view_outside_both_prefixes_may_pick_the_v1_shape():
    """The player's `/native/offer` answers `{"error"}` like the management API."""
    exc = errors.Forbidden("the operator denied this device")
    assert json.loads(answer(exc, "/native/offer", {"error_shape": "v1"}).content) == {
        "error": "the operator denied this device"
    }
    assert json.loads(answer(exc, "/native/offer").content)["status"] is False


def test_domain_errors_carry_no_framework():
    """Services raise these without importing DRF or Django."""
    import ast
    from pathlib import Path

    tree = ast.parse(Path(errors.__file__).read_text())
    imported = {
        alias.name if isinstance(node, ast.Import) else node.module
        for node in ast.walk(tree)
        if isinstance(node, (ast.Import, ast.ImportFrom))
        for alias in node.names
    }
    assert imported <= {"__future__"}, imported
