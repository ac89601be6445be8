"""Shapes of the library routes: validation of custom/provider input, and docs of the output."""

from __future__ import annotations

from rest_framework import serializers

from games.appfields import ELEVATED_REASON
from library.conf import MAX_TITLE


def _url(value: str) -> str:
    if not value.startswith(("http://", "https://", "/api/v1/library/art/")):
        raise serializers.ValidationError("must be an http(s) URL")
    return value


class ArtSerializer(serializers.Serializer):
    portrait = serializers.CharField(required=False, max_length=4096, validators=[_url])
    hero = serializers.CharField(required=False, max_length=4096, validators=[_url])
    logo = serializers.CharField(required=False, max_length=4096, validators=[_url])
    header = serializers.CharField(required=False, max_length=4096, validators=[_url])


class LaunchSerializer(serializers.Serializer):
    kind = serializers.ChoiceField(choices=["steam_appid", "lutris_id", "heroic", "command"])
    value = serializers.CharField(max_length=4096)


class PrepCmdSerializer(serializers.Serializer):
    do = serializers.CharField(max_length=4096, trim_whitespace=False)
    undo = serializers.CharField(
        required=False, allow_blank=True, max_length=4096, trim_whitespace=False
    )
    # Accepted for Sunshine-shaped steps; only `false` (games.appfields.ELEVATED_REASON).
    elevated = serializers.BooleanField(required=False)

    def validate_elevated(self, value: bool) -> bool:
        if value:
            raise serializers.ValidationError(ELEVATED_REASON)
        return value


class DetectSerializer(serializers.Serializer):
    install_dir = serializers.CharField(required=False, allow_blank=True, max_length=4096)
    exe = serializers.CharField(required=False, allow_blank=True, max_length=4096)
    process_name = serializers.CharField(required=False, allow_blank=True, max_length=256)


class CustomInputSerializer(serializers.Serializer):
    title = serializers.CharField(max_length=MAX_TITLE)
    art = ArtSerializer(required=False)
    launch = LaunchSerializer(required=False, allow_null=True)
    prep = PrepCmdSerializer(many=True, required=False, max_length=64)
    detect = DetectSerializer(required=False)
    platform = serializers.CharField(required=False, allow_blank=True, max_length=64)
    description = serializers.CharField(required=False, allow_blank=True, max_length=8192)
    developer = serializers.CharField(required=False, allow_blank=True, max_length=256)
    publisher = serializers.CharField(required=False, allow_blank=True, max_length=256)
    region = serializers.CharField(required=False, allow_blank=True, max_length=64)
    release_year = serializers.IntegerField(required=False, min_value=0, max_value=65535)
    players = serializers.IntegerField(required=False, min_value=0, max_value=255)
    genres = serializers.ListField(
        child=serializers.CharField(max_length=64), required=False, max_length=64
    )
    tags = serializers.ListField(
        child=serializers.CharField(max_length=64), required=False, max_length=64
    )

    def to_internal_value(self, data):
        value = super().to_internal_value(data)
        # Empty optional fields are omitted, as the listing omits them.
        out = {k: v for k, v in value.items() if v not in ("", [], {}, None)}
        if "detect" in out:
            out["detect"] = {k: v for k, v in out["detect"].items() if v}
            if not out["detect"]:
                del out["detect"]
        if "prep" in out:
            out["prep"] = [
                {"do": p["do"], **({"undo": p["undo"]} if p.get("undo") else {})}
                for p in out["prep"]
            ]
        return out


class ProviderEntryInputSerializer(CustomInputSerializer):
    external_id = serializers.CharField(max_length=256)


class GameEntrySerializer(serializers.Serializer):
    """GameEntry of `GET /library` (documentation only; never carries detect or prep)."""

    id = serializers.CharField(help_text="store-qualified, e.g. steam:570 or custom:<12 hex>")
    store = serializers.CharField()
    title = serializers.CharField()
    art = ArtSerializer()
    launch = LaunchSerializer(required=False)
    provider = serializers.CharField(required=False)
    platform = serializers.CharField(required=False)


class CustomEntrySerializer(CustomInputSerializer):
    """A stored custom entry (documentation only)."""

    id = serializers.CharField(help_text="12 hex, host-assigned")
    provider = serializers.CharField(required=False)
    external_id = serializers.CharField(required=False)


class ScannerSerializer(serializers.Serializer):
    id = serializers.CharField()
    label = serializers.CharField()
    enabled = serializers.BooleanField()
    state = serializers.ChoiceField(
        choices=["never", "queued", "scanning", "done", "failed"],
        help_text="progress of the store's latest rescan",
    )
    count = serializers.IntegerField(help_text="titles found by the last finished scan")
    scanned_at = serializers.DateTimeField(allow_null=True)
    error = serializers.CharField(allow_blank=True, help_text="why the last scan failed")


class ScanQueuedSerializer(serializers.Serializer):
    queued = serializers.BooleanField()
    requested_at = serializers.DateTimeField()


class ScannerToggleSerializer(serializers.Serializer):
    enabled = serializers.BooleanField()


class ProviderRemovedSerializer(serializers.Serializer):
    removed = serializers.IntegerField()


class AppEntrySerializer(serializers.Serializer):
    """One app of `apps.json` as `POST /api/apps` takes it (plus `index`)."""

    index = serializers.IntegerField(help_text="-1 creates; N replaces the app at N")
    name = serializers.CharField()
    cmd = serializers.CharField(required=False)
    env = serializers.DictField(child=serializers.CharField(), required=False)
    image_path = serializers.CharField(required=False, help_text="`image-path`: a valid PNG")


class CoverUploadSerializer(serializers.Serializer):
    key = serializers.CharField()
    url = serializers.CharField(required=False, help_text="only on the allowed image host")
    data = serializers.CharField(required=False, help_text="base64 image bytes")


class BrowseEntrySerializer(serializers.Serializer):
    name = serializers.CharField()
    path = serializers.CharField()
    type = serializers.ChoiceField(choices=["directory", "file"])


class BrowseSerializer(serializers.Serializer):
    path = serializers.CharField()
    parent = serializers.CharField()
    entries = BrowseEntrySerializer(many=True)


class ScanResultSerializer(serializers.Serializer):
    name = serializers.CharField()
    path = serializers.CharField()
    launcher = serializers.CharField()


class SavedAppSerializer(serializers.Serializer):
    status = serializers.BooleanField()
    status_code = serializers.IntegerField()
    index = serializers.IntegerField(help_text="the app's index after the by-name sort")


class DeletedAppSerializer(serializers.Serializer):
    status = serializers.BooleanField()
    status_code = serializers.IntegerField()
    result = serializers.CharField()


class CoverSavedSerializer(serializers.Serializer):
    status = serializers.BooleanField()
    status_code = serializers.IntegerField()
    path = serializers.CharField(help_text="where the PNG was stored (use as `image-path`)")


# apps.json as `GET /api/apps` serves it. An app's keys are Sunshine's (hyphenated, so a raw
# schema rather than a serializer); the ones named are typed, and any other is kept as stored.
_BOOL = {"type": "boolean"}
_STR = {"type": "string"}
APPS_DOCUMENT = {
    "type": "object",
    "properties": {
        "env": {"type": "object", "additionalProperties": _STR},
        "apps": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {
                    "name": _STR,
                    "cmd": _STR,
                    "image-path": _STR,
                    "working-dir": _STR,
                    "output": _STR,
                    "detached": {"type": "array", "items": _STR},
                    "prep-cmd": {"type": "array", "items": {"type": "object"}},
                    "exit-timeout": {"type": "integer"},
                    "auto-detach": _BOOL,
                    "wait-all": _BOOL,
                    "exclude-global-prep-cmd": _BOOL,
                    "elevated": _BOOL,
                },
                "required": ["name"],
                "additionalProperties": True,
            },
        },
    },
    "required": ["env", "apps"],
}
