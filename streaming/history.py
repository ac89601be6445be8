"""Session history: one `SessionRecord` per finished stream (a resumed session has several),
kept whether or not any webhook is configured. The session core calls `record_session` when a
client goes; the admin API and the console read through `recent`.
"""

from __future__ import annotations

from datetime import datetime

from streaming.models import SessionRecord

LIMIT_DEFAULT = 100
LIMIT_MAX = 1000
# Per-second samples kept per session for the console chart (one hour).
SAMPLES_MAX = 3600
_FIELDS = {f.name for f in SessionRecord._meta.get_fields()} - {"id"}


def record_session(*, t_start: datetime, t_end: datetime | None = None, samples=None, **fields):
    """Store a finished session. Unknown keys are ignored; samples are capped."""
    clean = {k: v for k, v in fields.items() if k in _FIELDS and v is not None}
    return SessionRecord.objects.create(
        t_start=t_start,
        t_end=t_end,
        samples=list(samples or [])[-SAMPLES_MAX:],
        **clean,
    )


def recent(limit: int = LIMIT_DEFAULT, app: str = "", client: str = "",
           session: str = "") -> list[SessionRecord]:  # fmt: skip
    """Newest first; `app`, `client` and `session` (a session id) match exactly."""
    query = SessionRecord.objects.all()
    if session:
        query = query.filter(session_id=session)
    if app:
        query = query.filter(app_name=app)
    if client:
        query = query.filter(client_name=client)
    return list(query.order_by("-t_start", "-id")[:limit])


def get(record_id: int) -> SessionRecord | None:
    return SessionRecord.objects.filter(pk=record_id).first()
