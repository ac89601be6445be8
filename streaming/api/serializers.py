"""Shapes of the streaming routes' answers (readiness, GPUs), for the generated API docs."""

from __future__ import annotations

from rest_framework import serializers


class CheckSerializer(serializers.Serializer):
    id = serializers.CharField()
    label = serializers.CharField()
    status = serializers.ChoiceField(choices=["pass", "warn", "fail", "skip"])
    detail = serializers.CharField()
    remediation = serializers.CharField(required=False)


class PreflightSerializer(serializers.Serializer):
    schema = serializers.IntegerField()
    generated_unix_ms = serializers.IntegerField()
    ready = serializers.BooleanField(help_text="no check failed")
    checks = CheckSerializer(many=True)


class GpuSerializer(serializers.Serializer):
    id = serializers.CharField(help_text="`<vendor>-<device>-<n>` in hex")
    name = serializers.CharField()
    vendor = serializers.CharField()
    vram_mb = serializers.IntegerField(allow_null=True)


class SelectedGpuSerializer(serializers.Serializer):
    id = serializers.CharField()
    name = serializers.CharField()
    vendor = serializers.CharField()
    source = serializers.CharField(help_text="why this one")


class ActiveGpuSerializer(serializers.Serializer):
    id = serializers.CharField()
    name = serializers.CharField()
    vendor = serializers.CharField()
    backend = serializers.CharField()
    sessions = serializers.IntegerField()


class GpuStateSerializer(serializers.Serializer):
    gpus = GpuSerializer(many=True)
    mode = serializers.ChoiceField(choices=["auto", "manual"])
    preferred_id = serializers.CharField(allow_null=True)
    preferred_name = serializers.CharField(allow_null=True)
    preferred_available = serializers.BooleanField()
    env_override = serializers.CharField(allow_null=True)
    encoder_pin = serializers.CharField(allow_null=True)
    selected = SelectedGpuSerializer(allow_null=True)
    active = ActiveGpuSerializer(allow_null=True)


class GpuPreferenceSerializer(serializers.Serializer):
    mode = serializers.ChoiceField(choices=["auto", "manual"])
    gpu_id = serializers.CharField(required=False, allow_null=True)
