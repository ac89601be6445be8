"""The browser plane refuses an `encoder` that cannot open here, as GameStream does: the offer
is answered with the reason (503), never streamed in software."""

from __future__ import annotations

import pytest

from tests.native.helpers import Knocker, fake_fp
from tests.support.moonlight import host_config

pytestmark = pytest.mark.e2e


def test_an_approved_offer_is_refused_with_the_encoders_reason(live_host):
    knocker = Knocker(live_host)
    fp = fake_fp()
    try:
        r = knocker.knock(fp)
        assert r.status_code == 202, r.text
        with live_host.mgmt() as api:
            r = api.post(f"/api/v1/native/pending/{r.json()['id']}/approve")
            assert r.status_code == 200, r.text
        with host_config(live_host, {"encoder": "vaapi"}):  # hand-edited: the APIs refuse it
            r = knocker.knock(fp)
        assert r.status_code == 503, r.text
        assert r.json()["error"].startswith(
            "The configured encoder cannot be used: vaapi: this PyAV/FFmpeg build has no "
        ), r.text
    finally:
        knocker.close()
        with live_host.mgmt() as api:  # leave no paired device behind for the next test
            api.delete(f"/api/v1/clients/{fp}")
