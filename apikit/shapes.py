"""Shapes of the platform routes' answers, for the generated API docs (`/api/schema`).

Free-form on purpose (their keys come from the config schema, `hostconfig/schema.py`, and
are documented there): the host config `settings` sections, the admin config's key/value
pairs, and the one representative `session` / `stream` objects of the status snapshot.
"""

from __future__ import annotations

from rest_framework import serializers


class AdminStatusSerializer(serializers.Serializer):
    status = serializers.BooleanField()
    status_code = serializers.IntegerField()


class HealthSerializer(serializers.Serializer):
    status = serializers.CharField(help_text="`ok`")
    status_code = serializers.IntegerField()
    version = serializers.CharField()
    uptime = serializers.IntegerField(help_text="seconds")


class PortsSerializer(serializers.Serializer):
    mgmt = serializers.IntegerField()
    http = serializers.IntegerField()
    https = serializers.IntegerField()
    rtsp = serializers.IntegerField()
    video = serializers.IntegerField()
    control = serializers.IntegerField()
    audio = serializers.IntegerField()


class HostInfoSerializer(serializers.Serializer):
    hostname = serializers.CharField()
    uniqueid = serializers.CharField()
    local_ip = serializers.CharField()
    version = serializers.CharField()
    abi_version = serializers.IntegerField()
    app_version = serializers.CharField()
    gfe_version = serializers.CharField()
    os = serializers.CharField()
    os_name = serializers.CharField()
    codecs = serializers.ListField(child=serializers.CharField())
    encoder = serializers.CharField()
    compat = serializers.BooleanField()
    ports = PortsSerializer()


class HostConfigStateSerializer(serializers.Serializer):
    settings = serializers.DictField(
        help_text="the config file form: `version`, sections `general`, `input`, "
        "`audio_video`, `network`, `encoders`, and top-level enums (config schema keys)"
    )
    configured = serializers.BooleanField()
    requires_restart = serializers.BooleanField()
    env_path = serializers.CharField()
    refused = serializers.DictField(
        child=serializers.CharField(),
        help_text="dotted field -> why the host accepts only its default",
    )
    refused_values = serializers.DictField(
        child=serializers.DictField(child=serializers.CharField()),
        help_text="dotted field -> {value -> why}: values of an acting field this host cannot do",
    )


class UpdateStatusSerializer(serializers.Serializer):
    install_kind = serializers.CharField()
    channel = serializers.CharField()
    current_version = serializers.CharField()
    apply = serializers.CharField(help_text="manual, or auto while update_auto is on")
    auto_idle_minutes = serializers.IntegerField(
        help_text="update_auto: idle minutes before an announced release applies itself (0: off)"
    )
    channel_hint = serializers.CharField()
    check_disabled = serializers.BooleanField()
    available = serializers.BooleanField()
    manifest = serializers.DictField(allow_null=True, help_text="the verified manifest")
    last_checked_unix = serializers.IntegerField(allow_null=True)
    last_error = serializers.CharField(allow_null=True)
    not_published = serializers.BooleanField()
    apply_supported = serializers.BooleanField()
    refused = serializers.CharField(allow_null=True)
    note = serializers.CharField()


class AdminUpdateStatusSerializer(AdminStatusSerializer, UpdateStatusSerializer):
    pass


class ConfigLocaleSerializer(serializers.Serializer):
    status = serializers.BooleanField()
    locale = serializers.CharField()


class CsrfTokenSerializer(serializers.Serializer):
    csrf_token = serializers.CharField()


class PasswordRequestSerializer(serializers.Serializer):
    currentUsername = serializers.CharField(required=False)  # the wire name
    currentPassword = serializers.CharField(required=False)
    newUsername = serializers.CharField(required=False)
    newPassword = serializers.CharField()
    confirmNewPassword = serializers.CharField()


class VigemStatusSerializer(AdminStatusSerializer):
    error = serializers.CharField()
    installed = serializers.BooleanField()
    version = serializers.CharField()
    version_compatible = serializers.BooleanField()
    packaged_version = serializers.CharField()


class RestartingSerializer(AdminStatusSerializer):
    restarting = serializers.BooleanField()


class ConfigSavedSerializer(AdminStatusSerializer):
    restart_required = serializers.BooleanField()


class CompatRequestSerializer(serializers.Serializer):
    enabled = serializers.BooleanField()


class SummarySerializer(serializers.Serializer):
    min = serializers.FloatField(allow_null=True)
    max = serializers.FloatField(allow_null=True)
    avg = serializers.FloatField(allow_null=True)
    samples = serializers.IntegerField()


class NetworkSampleSerializer(serializers.Serializer):
    ts_ms = serializers.IntegerField()
    session_id = serializers.CharField(required=False, help_text="the session it came from")
    rtt_ms = serializers.FloatField(allow_null=True)
    loss_pct = serializers.FloatField(allow_null=True)
    bitrate_kbps = serializers.FloatField(allow_null=True)
    target_kbps = serializers.FloatField(allow_null=True)


class NetworkSerializer(serializers.Serializer):
    window_s = serializers.IntegerField()
    samples = NetworkSampleSerializer(many=True)
    rtt_ms = SummarySerializer()
    loss_pct = SummarySerializer()
    bitrate_kbps = SummarySerializer()
    target_kbps = SummarySerializer()


class NetworkStatsSerializer(AdminStatusSerializer):
    network = NetworkSerializer()


class SessionRecordSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    t_start = serializers.IntegerField(help_text="unix seconds")
    t_end = serializers.IntegerField(allow_null=True)
    app_name = serializers.CharField()
    client_name = serializers.CharField()
    client_address = serializers.CharField()
    codec = serializers.CharField()
    width = serializers.IntegerField()
    height = serializers.IntegerField()
    fps = serializers.IntegerField()
    avg_bitrate_kbps = serializers.FloatField()
    avg_rtt_ms = serializers.FloatField()
    avg_encode_ms = serializers.FloatField()
    dropped_frames = serializers.IntegerField()
    error = serializers.CharField()
    session_id = serializers.CharField(help_text="the live session this stream belonged to")


class SessionListSerializer(AdminStatusSerializer):
    sessions = SessionRecordSerializer(many=True)


class SessionWithSamplesSerializer(SessionRecordSerializer):
    samples = serializers.ListField(
        child=serializers.DictField(),
        help_text="per-second `{t, bitrate_kbps, rtt_ms, encode_ms}` as the session wrote them",
    )


class SessionDetailSerializer(AdminStatusSerializer):
    session = SessionWithSamplesSerializer()


class TokenRevokedSerializer(AdminStatusSerializer):
    pass


# Every config key with its value beside the fixed fields: a raw schema, since a serializer
# cannot say "these properties, and any other key".
ADMIN_CONFIG = {
    "type": "object",
    "properties": {
        "status": {"type": "boolean"},
        "status_code": {"type": "integer"},
        "platform": {"type": "string"},
        "version": {"type": "string"},
        "file_only": {"type": "object", "additionalProperties": True},
        "defaults": {"type": "object", "additionalProperties": True},
        "restart_required_keys": {"type": "array", "items": {"type": "string"}},
        "refused": {
            "type": "object",
            "description": "key -> why the host accepts only its default",
            "additionalProperties": {"type": "string"},
        },
        "refused_values": {
            "type": "object",
            "description": "key -> {value -> why}: values of an acting key this host cannot do",
            "additionalProperties": {
                "type": "object",
                "additionalProperties": {"type": "string"},
            },
        },
    },
    "required": ["status", "status_code", "platform", "version", "refused", "refused_values"],
    "additionalProperties": True,
}


class ClosedSerializer(serializers.Serializer):
    status = serializers.BooleanField()
