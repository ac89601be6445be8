"""The player's offer body (`POST /native/offer`), validated before anything is looked up.

Messages name the field, because the player shows the first one to the person at the screen.
"""

from __future__ import annotations

import re

from rest_framework import serializers

from common.errors import Invalid
from displays.machine import DisplayError, parse_mode
from native.services import sdp_fingerprint

FP_RE = re.compile(r"[0-9a-f]{64}")
PIN_RE = re.compile(r"[0-9]{4}")  # not \d: that matches every script's digits
TRANSPORTS = ("webrtc", "webcodecs")
DECODES = ("h264", "hevc", "av1")  # what a page's WebCodecs may say it decodes


def _int(name: str) -> serializers.IntegerField:
    return serializers.IntegerField(
        error_messages={
            "required": f"{name} is required",
            "invalid": f"{name} must be an integer",
            "null": f"{name} must be an integer",
            "max_string_length": f"{name} must be an integer",
        }
    )


class OfferSerializer(serializers.Serializer):
    """`{sdp, width, height, fps, name?, app?, pin?, transport?, decodes?}`; adds `fingerprint`.
    `decodes`: the codecs the page's WebCodecs decodes (the host picks among them for the
    `webcodecs` transport; WebRTC carries H.264)."""

    sdp = serializers.CharField(
        trim_whitespace=False,
        error_messages={
            "required": "sdp is required",
            "invalid": "sdp must be an SDP offer",
            "blank": "sdp must be an SDP offer",
            "null": "sdp must be an SDP offer",
        },
    )
    width = _int("width")
    height = _int("height")
    fps = _int("fps")
    name = serializers.JSONField(required=False, allow_null=True, default=None)
    app = serializers.JSONField(required=False, allow_null=True, default=None)
    pin = serializers.JSONField(required=False, allow_null=True, default=None)
    transport = serializers.JSONField(required=False, allow_null=True, default="webrtc")
    decodes = serializers.JSONField(required=False, allow_null=True, default=None)

    def validate_sdp(self, sdp: str) -> str:
        if not sdp.startswith("v=0"):
            raise serializers.ValidationError("sdp must be an SDP offer")
        if "m=video" not in sdp:
            raise serializers.ValidationError("the offer has no video to receive")
        return sdp

    def validate_app(self, app) -> str:
        return app if isinstance(app, str) else "desktop"

    def validate_pin(self, raw) -> str | None:
        """None when absent or blank, else 4 ASCII digits."""
        if raw is None:
            return None
        if not isinstance(raw, str):
            raise serializers.ValidationError("pin must be a string of 4 digits")
        pin = raw.strip()
        if not pin:
            return None
        if not PIN_RE.fullmatch(pin):
            raise serializers.ValidationError("pin must be 4 digits (0-9)")
        return pin

    def validate_transport(self, transport) -> str:
        if transport not in TRANSPORTS:
            raise serializers.ValidationError("transport must be webrtc or webcodecs")
        return transport

    def validate_decodes(self, raw) -> list[str]:
        if raw is None:
            return ["h264"]
        if (
            not isinstance(raw, list)
            or not all(isinstance(c, str) and c in DECODES for c in raw)
            or len(set(raw)) != len(raw)
        ):
            raise serializers.ValidationError("decodes must list codecs of h264, hevc, av1")
        return raw

    def validate(self, attrs: dict) -> dict:
        try:
            parse_mode(f"{attrs['width']}x{attrs['height']}@{attrs['fps']}")
        except DisplayError as exc:
            raise serializers.ValidationError({"mode": str(exc)}) from None
        try:
            attrs["fingerprint"] = sdp_fingerprint(attrs["sdp"])
        except Invalid as exc:
            raise serializers.ValidationError({"sdp": str(exc)}) from None
        return attrs


def _text(name: str, most: int) -> serializers.CharField:
    return serializers.CharField(
        max_length=most,
        error_messages={
            "required": f"{name} is required",
            "blank": f"{name} is required",
            "null": f"{name} is required",
            "invalid": f"{name} must be text",
            "max_length": f"{name} must be at most {most} characters",
        },
    )


class PlaceSerializer(serializers.Serializer):
    """`{app, title, name?, fingerprint, pin?}`: a member's title (its id and name as the
    picker lists them) for this page's device (its DTLS certificate's SHA-256)."""

    app = _text("app", 200)
    title = _text("title", 200)
    fingerprint = _text("fingerprint", 128)
    name = serializers.JSONField(required=False, allow_null=True, default=None)
    pin = serializers.JSONField(required=False, allow_null=True, default=None)
    validate_pin = OfferSerializer.validate_pin

    def validate_fingerprint(self, raw: str) -> str:
        fp = raw.strip().lower().replace(":", "")
        if not FP_RE.fullmatch(fp):
            raise serializers.ValidationError("fingerprint must be a SHA-256 (64 hex digits)")
        return fp
