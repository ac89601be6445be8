"""Domain errors: what a service raises when it refuses a request.

Plain Python (no Django, no DRF), so services, protocol-free helpers and their tests share one
vocabulary; `apikit/errors.py` is the one place that turns them into each API's body
(`{"error", "fields"?}` under `/api/v1`, `{"status": false, "status_code", "error"}` under
`/api`). `status` is the HTTP status an API answers with; the subclasses name the usual ones.
"""

from __future__ import annotations


class DomainError(Exception):
    """A refusal with the message the caller should see.

    `fields` maps a dotted field path to its message (a 400 with per-field detail);
    `retry_after` (seconds) becomes a `Retry-After` header.
    """

    status = 400

    def __init__(
        self,
        message: str,
        *,
        status: int | None = None,
        fields: dict[str, str] | None = None,
        retry_after: int | None = None,
    ):
        super().__init__(message)
        self.message = message
        if status is not None:
            self.status = status
        self.fields = fields
        self.retry_after = retry_after


class Invalid(DomainError):
    status = 400


class Forbidden(DomainError):
    status = 403


class NotFound(DomainError):
    status = 404


class Conflict(DomainError):
    status = 409


class TooLarge(DomainError):
    status = 413


class Unsupported(DomainError):
    """The request's media type is not one the route reads."""

    status = 415


class TooMany(DomainError):
    status = 429


class Failed(DomainError):
    """The host could not do what was asked (a write failed); not the caller's fault."""

    status = 500


class Unavailable(DomainError):
    status = 503


class InsufficientStorage(DomainError):
    """The state directory is full: nothing was written, the previous files are intact."""

    status = 507


STORAGE_RETRY_AFTER_S = 30
