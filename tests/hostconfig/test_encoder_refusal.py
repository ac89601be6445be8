"""`encoder` naming a backend this machine cannot open is refused with what is missing, by both
config APIs and preflight, instead of being stored and silently encoded in software.

The probe is this machine's own (`media.encoders.available`): its PyAV build has no VA-API
encoder at all, and nvenc/qsv/amf open only where their GPU and driver are.
"""

from __future__ import annotations

import pytest

from hostconfig import store
from media import encoders

pytestmark = pytest.mark.django_db

VAAPI = "vaapi: this PyAV/FFmpeg build has no h264_vaapi/hevc_vaapi/av1_vaapi encoder"


def _unusable() -> list[str]:
    """The GPU backends that cannot encode here, with their reason (this machine's probe)."""
    return [b for b in encoders.NEEDS if encoders.pin_problem(b)]


def test_the_admin_api_refuses_an_encoder_that_cannot_open_here_naming_what_is_missing(
    admin, state
):
    r = admin.post("/api/config", {"encoder": "VAAPI"}, format="json")
    assert r.status_code == 400, r.content
    body = r.json()
    assert body["status"] is False and body["status_code"] == 400
    assert body["error"].startswith(f"invalid configuration: encoder: {VAAPI}"), body
    assert "encoder" not in store.read_raw()  # nothing written
    for name in _unusable():  # nvenc/qsv/amf where this machine lacks them
        r = admin.post("/api/config", {"encoder": name}, format="json")
        assert r.status_code == 400 and encoders.pin_problem(name) in r.json()["error"], r.content
    for ok in ("software", "auto"):
        r = admin.post("/api/config", {"encoder": ok}, format="json")
        assert r.status_code == 200, r.content
    assert store.read_raw()["encoder"] == "auto"


def test_the_management_api_refuses_it_in_the_file_form(v1, state):
    r = v1.put("/api/v1/host/config", {"version": 1, "encoders": {"encoder": "vaapi"}},
               format="json")  # fmt: skip
    assert r.status_code == 400, r.content
    field = next(f for f in r.json()["fields"] if f["field"] == "encoders.encoder")
    assert r.json()["error"] == "invalid host configuration"
    assert VAAPI in str(field), r.content
    assert "encoder" not in store.read_raw()
    r = v1.put("/api/v1/host/config", {"version": 1, "encoders": {"encoder": "software"}},
               format="json")  # fmt: skip
    assert r.status_code == 200 and r.json()["settings"]["encoders"]["encoder"] == "software"


def test_preflight_fails_the_encoder_check_for_a_hand_edited_value(v1, state):
    store.write({"encoder": "vaapi"})  # as an operator's editor would leave the file
    report = v1.get("/api/v1/diagnostics/preflight").json()
    check = next(c for c in report["checks"] if c["id"] == "encoder")
    assert check["status"] == "fail" and check["detail"].startswith(VAAPI), check
    assert check["remediation"] == "set encoder = auto or software"
    assert report["ready"] is False
    store.write({"encoder": "software"})
    report = v1.get("/api/v1/diagnostics/preflight").json()
    check = next(c for c in report["checks"] if c["id"] == "encoder")
    assert check["status"] in ("pass", "warn") and check["detail"].startswith("software"), check
