"""Error bodies of the two APIs, rendered in one place.

- Management API (`/api/v1`): `{"error": str, "fields": [{"field", "message"}]?}`.
- Admin API (`/api`): `{"status": false, "status_code": int, "error": str}`.

Services raise `common.errors.DomainError` (no DRF there); views may raise it or
`ApiError`; `exception_handler` maps both. A view outside both prefixes (the native player's
`/native/offer`) picks a shape with `error_shape = "v1"`.
"""

from __future__ import annotations

import logging

import redis
from django.core.exceptions import RequestDataTooBig
from django.http import Http404, JsonResponse
from rest_framework import exceptions, status
from rest_framework.response import Response

from common.errors import DomainError
from common.files import storage_refusal

log = logging.getLogger(__name__)

V1_PREFIX = "/api/v1/"
# Redis out of reach: the host restarts it within seconds (the supervisor's backoff).
REDIS_DOWN = "the host's Redis is out of reach; try again shortly"
REDIS_RETRY_AFTER_S = 5


class ApiError(exceptions.APIException):
    """Raise from a view with the status and message the caller should see (services raise
    `common.errors.DomainError` instead)."""

    def __init__(self, status_code: int, message: str, fields: list[dict] | None = None):
        self.status_code = status_code
        self.message = message
        self.fields = fields
        super().__init__(detail=message)


class FieldErrors(ApiError):
    """400 with per-field messages; `fields` maps a dotted path to its message."""

    def __init__(self, message: str, fields: dict[str, str]):
        super().__init__(400, message, field_items(fields))


def is_v1_path(path: str) -> bool:
    return path == V1_PREFIX.rstrip("/") or path.startswith(V1_PREFIX)


def field_items(fields: dict[str, str] | None) -> list[dict] | None:
    """`{"a.b": msg}` -> `[{"field": "a.b", "message": msg}]` (None when there are none)."""
    if not fields:
        return None
    return [{"field": k, "message": v} for k, v in fields.items()]


def v1_body(message: str, fields: list[dict] | None = None) -> dict:
    body: dict = {"error": message}
    if fields:
        body["fields"] = fields
    return body


def admin_body(status_code: int, message: str) -> dict:
    return {"status": False, "status_code": status_code, "error": message}


def error_body(path: str, status_code: int, message: str, fields: list[dict] | None = None):
    if is_v1_path(path):
        return v1_body(message, fields)
    return admin_body(status_code, message)


def json_error(path: str, status_code: int, message: str, headers: dict | None = None):
    """A plain Django JsonResponse in the right shape, for code that runs outside DRF."""
    response = JsonResponse(error_body(path, status_code, message), status=status_code)
    for key, value in (headers or {}).items():
        response[key] = value
    return response


def _message(detail) -> str:
    if isinstance(detail, list):
        return "; ".join(_message(d) for d in detail)
    if isinstance(detail, dict):
        return "; ".join(f"{k}: {_message(v)}" for k, v in detail.items())
    return str(detail)


def _flatten_fields(detail, prefix: str = "") -> list[dict]:
    out: list[dict] = []
    if isinstance(detail, dict):
        for key, value in detail.items():
            path = f"{prefix}.{key}" if prefix else str(key)
            out.extend(_flatten_fields(value, path))
    elif (
        isinstance(detail, list)
        and detail
        and not all(isinstance(d, (str, exceptions.ErrorDetail)) for d in detail)
    ):
        for i, value in enumerate(detail):
            out.extend(_flatten_fields(value, f"{prefix}[{i}]"))
    else:
        out.append({"field": prefix or "body", "message": _message(detail)})
    return out


def exception_handler(exc, context):
    """DRF exception handler: every failure in the shape of the API it happened in."""
    request = context.get("request")
    path = request.path if request is not None else ""
    v1 = getattr(context.get("view"), "error_shape", None) == "v1" or is_v1_path(path)
    headers: dict[str, str] = {}

    if isinstance(exc, Http404):
        exc = exceptions.NotFound()
    exc = storage_refusal(exc) or exc  # a full or read-only state dir: 507 / 503
    if isinstance(exc, RequestDataTooBig):  # daphne refuses first; this is the in-process guard
        code, message, fields = 413, "request body too large", None
    elif isinstance(exc, (redis.ConnectionError, redis.TimeoutError)):
        code, message, fields = 503, REDIS_DOWN, None
        headers["Retry-After"] = str(REDIS_RETRY_AFTER_S)
    elif isinstance(exc, DomainError):
        code, message = exc.status, exc.message
        fields = field_items(exc.fields) if code == 400 else None
        if exc.retry_after is not None:
            headers["Retry-After"] = str(int(exc.retry_after))
    elif isinstance(exc, ApiError):
        code, message, fields = exc.status_code, exc.message, exc.fields
    elif isinstance(exc, exceptions.ValidationError):
        code = 400
        fields = _flatten_fields(exc.detail)
        message = "invalid request body"
    elif isinstance(exc, exceptions.APIException):
        code, message, fields = exc.status_code, _message(exc.detail), None
        if isinstance(exc, exceptions.UnsupportedMediaType):
            message = "request body must be application/json"
            if not v1:  # the admin API documents content-type mistakes as validation failures
                code = 400
        if isinstance(exc, exceptions.ParseError):
            message = "malformed JSON body"
        if getattr(exc, "auth_header", None):
            headers["WWW-Authenticate"] = exc.auth_header
        if getattr(exc, "wait", None):
            headers["Retry-After"] = str(int(exc.wait))
    else:
        log.exception("unhandled error on %s", path)
        code, message, fields = 500, "internal error", None

    if code == status.HTTP_401_UNAUTHORIZED and "WWW-Authenticate" not in headers:
        auth_header = _authenticate_header(context)
        if auth_header:
            headers["WWW-Authenticate"] = auth_header
    body = v1_body(message, fields) if v1 else admin_body(code, message)
    return Response(body, status=code, headers=headers)


def _authenticate_header(context) -> str | None:
    view = context.get("view")
    request = context.get("request")
    if view is None or request is None:
        return None
    try:
        return view.get_authenticate_header(request)
    except Exception:  # a header is a courtesy, never a second failure
        return None
