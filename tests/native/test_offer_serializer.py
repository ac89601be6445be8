"""The offer body's validation (`native/api/serializers.py`), without a host: every
message names its field, because the player shows the first one."""

from __future__ import annotations

import pytest

from native.api.serializers import OfferSerializer
from tests.native.helpers import fake_fp, offer_sdp


def body(**extra) -> dict:
    fp = extra.pop("fp", None) or fake_fp()
    return {"sdp": offer_sdp(fp), "width": 1280, "height": 720, "fps": 60, **extra}


def errors(data) -> dict:
    s = OfferSerializer(data=data)
    assert not s.is_valid()
    return {k: [str(m) for m in v] for k, v in s.errors.items()}


def test_a_good_offer_carries_its_fingerprint_and_defaults():
    fp = fake_fp()
    s = OfferSerializer(data=body(fp=fp, name="tv", pin=" 0123 "))
    assert s.is_valid(), s.errors
    v = s.validated_data
    assert v["fingerprint"] == fp and v["pin"] == "0123" and v["name"] == "tv"
    assert v["app"] == "desktop" and v["transport"] == "webrtc" and v["decodes"] == ["h264"]
    s = OfferSerializer(data=body(transport="webcodecs", decodes=["av1", "h264"]))
    assert s.is_valid(), s.errors
    assert s.validated_data["decodes"] == ["av1", "h264"]
    assert (v["width"], v["height"], v["fps"]) == (1280, 720, 60)


@pytest.mark.parametrize(
    "change,field,message",
    [
        ({"sdp": "x"}, "sdp", "sdp must be an SDP offer"),
        ({"decodes": "av1"}, "decodes", "decodes must list codecs of h264, hevc, av1"),
        ({"decodes": ["vp9"]}, "decodes", "decodes must list codecs of h264, hevc, av1"),
        ({"decodes": ["av1", "av1"]}, "decodes", "decodes must list codecs of h264, hevc, av1"),
        ({"decodes": [1]}, "decodes", "decodes must list codecs of h264, hevc, av1"),
        ({"sdp": "v=0\r\n"}, "sdp", "the offer has no video to receive"),
        ({"sdp": "v=0\r\nm=video 9 X 96\r\n"}, "sdp", "exactly one a=fingerprint"),
        ({"width": "wide"}, "width", "width must be an integer"),
        ({"width": 13}, "mode", "mode must be"),
        ({"transport": "carrier pigeon"}, "transport", "transport must be webrtc or webcodecs"),
        ({"pin": "\u0661\u0662\u0663\u0664"}, "pin", "pin must be 4 digits (0-9)"),
        ({"pin": 1234}, "pin", "pin must be a string of 4 digits"),
    ],
)
def test_bad_fields_say_what_is_wrong(change, field, message):
    found = errors({**body(), **change})
    assert field in found and message in found[field][0], found


def test_missing_fields_are_named():
    found = errors({"sdp": offer_sdp(fake_fp())})
    assert found == {
        "width": ["width is required"],
        "height": ["height is required"],
        "fps": ["fps is required"],
    }


def test_a_blank_pin_is_no_pin():
    s = OfferSerializer(data=body(pin="  "))
    assert s.is_valid(), s.errors
    assert s.validated_data["pin"] is None
