"""Write time of the apps.json run fields, in process: `elevated: true` refused with its reason
by both APIs (admin `POST /api/apps`, the v1 custom entries' prep steps), `output` checked, and
a hand edit that sets them reported by the readiness report."""

from __future__ import annotations

import json

import pytest

from games.appfields import ELEVATED_REASON
from library import catalog
from streaming import preflight

pytestmark = [pytest.mark.django_db, pytest.mark.urls("tests.library.urls")]


def names(state) -> list[str]:
    return [a.name for a in catalog.list_apps()]


def test_admin_refuses_elevated_with_the_reason_and_keeps_false(state, admin):
    for body in ({"elevated": True}, {"elevated": "true"},
                 {"prep-cmd": [{"do": "x", "elevated": True}]}):  # fmt: skip
        r = admin.post("/api/apps", {"index": -1, "name": "Admin", **body}, "json")
        assert r.status_code == 400, body
        assert ELEVATED_REASON in r.json()["error"] and r.json()["status"] is False
    assert "Admin" not in names(state)
    body = {"index": -1, "name": "Plain", "elevated": False,
            "prep-cmd": [{"do": "x", "elevated": False}]}  # fmt: skip
    assert admin.post("/api/apps", body, "json").status_code == 200
    assert "Plain" in names(state)


def test_admin_checks_output_at_write_time(state, admin, tmp_path):
    bad = {"out.log": "absolute", str(tmp_path / "no" / "x.log"): "does not exist",
           "/proc/1/x.log": "not writable", f"{tmp_path}/a\nb": "printable"}  # fmt: skip
    for value, why in bad.items():
        r = admin.post("/api/apps", {"index": -1, "name": "Out", "output": value}, "json")
        assert r.status_code == 400 and why in r.json()["error"], (value, r.json())
    good = str(tmp_path / "out.log")
    r = admin.post("/api/apps", {"index": -1, "name": "Out", "output": good}, "json")
    assert r.status_code == 200
    assert next(a for a in catalog.list_apps() if a.name == "Out").output == good


def test_v1_custom_prep_refuses_elevated_with_the_reason(state, mgmt):
    body = {"title": "Elevated prep", "prep": [{"do": "x", "elevated": True}]}
    r = mgmt.post("/api/v1/library/custom", body, "json")
    assert r.status_code == 400 and ELEVATED_REASON in json.dumps(r.json())
    body["prep"][0]["elevated"] = False
    assert mgmt.post("/api/v1/library/custom", body, "json").status_code == 201


def test_preflight_reports_a_hand_edit_that_sets_elevated_or_a_bad_output(state, tmp_path):
    assert preflight.app_catalog()["status"] == "pass"
    assert not (state / "apps.json").exists()  # the report creates nothing
    doc = {"env": {}, "apps": [
        {"name": "Fine", "output": str(tmp_path / "ok.log")},
        {"name": "Admin", "elevated": True, "prep-cmd": [{"do": "x", "elevated": "true"}]},
        {"name": "Lost", "output": str(tmp_path / "nowhere" / "x.log")},
    ]}  # fmt: skip
    (state / "apps.json").write_text(json.dumps(doc))
    check = preflight.app_catalog()
    assert check["status"] == "warn", check
    assert "'Admin': elevated:" in check["detail"] and "prep-cmd[0].elevated" in check["detail"]
    assert "'Lost': output: the directory" in check["detail"] and "'Fine'" not in check["detail"]
    (state / "apps.json").write_text(json.dumps({"env": {}, "apps": [doc["apps"][0]]}))
    assert preflight.app_catalog()["status"] == "pass"
    (state / "apps.json").write_text("{broken")
    broken = preflight.app_catalog()
    assert broken["status"] == "warn" and "not valid JSON" in broken["detail"]
