"""Shapes of the display routes' answers, for the generated API docs.

`settings`, `effective`, preset `fields` and `positions` stay free-form objects: their keys
are the display policy's axes (`displays/policy.py`), documented there and validated by it.
"""

from __future__ import annotations

from rest_framework import serializers


class BackendSerializer(serializers.Serializer):
    id = serializers.CharField()
    label = serializers.CharField()
    available = serializers.BooleanField()
    reason = serializers.CharField(required=False, help_text="why not, when unavailable")


class CaptureMethodSerializer(BackendSerializer):
    resolves_to = serializers.CharField(required=False, help_text="`auto` only: the backend")
    selected = serializers.BooleanField(required=False)


class CompositorSerializer(BackendSerializer):
    default = serializers.BooleanField()


class MonitorsSerializer(serializers.Serializer):
    compositor = serializers.CharField(allow_null=True)
    monitors = serializers.ListField(
        child=serializers.DictField(), help_text="heads: connector, geometry, `selected`"
    )
    pinned = serializers.CharField(allow_null=True)
    pin_supported = serializers.BooleanField()
    error = serializers.CharField(allow_null=True)


class PresetSerializer(serializers.Serializer):
    id = serializers.CharField()
    name = serializers.CharField()
    fields = serializers.DictField(help_text="the policy axes this preset sets")
    game_session = serializers.CharField(help_text="auto, or how a game session uses it")


class DisplaySettingsStateSerializer(serializers.Serializer):
    settings = serializers.DictField(help_text="the stored policy (`displays/policy.py` axes)")
    configured = serializers.BooleanField()
    effective = serializers.DictField(help_text="the policy in force, presets resolved")
    presets = serializers.ListField(child=serializers.DictField())
    custom_presets = PresetSerializer(many=True)
    enforced = serializers.ListField(child=serializers.CharField())
    unsupported = serializers.DictField(child=serializers.CharField())


class RegionSerializer(serializers.Serializer):
    left = serializers.IntegerField()
    top = serializers.IntegerField()
    width = serializers.IntegerField()
    height = serializers.IntegerField()


class VirtualDisplaySerializer(serializers.Serializer):
    slot = serializers.IntegerField()
    backend = serializers.CharField()
    owned = serializers.BooleanField()
    mode = serializers.CharField()
    state = serializers.ChoiceField(choices=["active", "lingering", "pinned"])
    expires_in_ms = serializers.IntegerField(allow_null=True)
    sessions = serializers.IntegerField()
    client = serializers.CharField(allow_null=True)
    group = serializers.IntegerField()
    display_index = serializers.IntegerField()
    x = serializers.IntegerField()
    y = serializers.IntegerField()
    identity_slot = serializers.IntegerField(allow_null=True)
    topology = serializers.CharField()
    x_display = serializers.CharField(allow_null=True)
    output = serializers.CharField(allow_null=True)
    wayland_display = serializers.CharField(allow_null=True)
    pid = serializers.IntegerField(allow_null=True)
    running = serializers.BooleanField()
    region = RegionSerializer(allow_null=True)
    pin_on_leave = serializers.BooleanField(
        help_text="pinned when its last session leaves (POST /display/pin on an active display)"
    )


class DisplayStateSerializer(serializers.Serializer):
    displays = VirtualDisplaySerializer(many=True)


class ReleasedSerializer(serializers.Serializer):
    released = serializers.IntegerField(help_text="how many displays were torn down")


class ReleaseRequestSerializer(serializers.Serializer):
    slot = serializers.IntegerField(required=False, min_value=0, help_text="omitted: all kept")


class SlotSerializer(serializers.Serializer):
    slot = serializers.IntegerField(min_value=0)
