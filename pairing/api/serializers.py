"""Shapes of the pairing routes, for the generated API docs."""

from __future__ import annotations

from rest_framework import serializers


class PairedClientSerializer(serializers.Serializer):
    fingerprint = serializers.CharField(help_text="lowercase hex SHA-256 of the certificate DER")
    name = serializers.CharField()
    uuid = serializers.CharField()
    enabled = serializers.BooleanField()
    plane = serializers.CharField()
    subject = serializers.CharField(allow_null=True)
    not_before_unix = serializers.IntegerField(allow_null=True)
    not_after_unix = serializers.IntegerField(allow_null=True)
    paired_at_unix = serializers.IntegerField()
    last_seen_unix = serializers.IntegerField(allow_null=True)


class NamedCertSerializer(serializers.Serializer):
    name = serializers.CharField()
    uuid = serializers.CharField()
    enabled = serializers.BooleanField()
    cert = serializers.CharField(help_text="certificate fingerprint (the PEM is never exposed)")


class ClientListSerializer(serializers.Serializer):
    status = serializers.BooleanField()
    status_code = serializers.IntegerField()
    named_certs = NamedCertSerializer(many=True)


class StatusSerializer(serializers.Serializer):
    status = serializers.BooleanField()
    status_code = serializers.IntegerField()


class PinSerializer(serializers.Serializer):
    pin = serializers.CharField(help_text="the 4 digits the client shows, 0000 to 9999")
    name = serializers.CharField(required=False, help_text="friendly name for the client")


class UuidSerializer(serializers.Serializer):
    uuid = serializers.CharField()


class UpdateSerializer(serializers.Serializer):
    uuid = serializers.CharField()
    enabled = serializers.BooleanField(default=True)


class PendingDeviceSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    name = serializers.CharField()
    fingerprint = serializers.CharField()
    age_secs = serializers.IntegerField()


class NativeClientSerializer(serializers.Serializer):
    name = serializers.CharField()
    fingerprint = serializers.CharField()


class NativePairStatusSerializer(serializers.Serializer):
    enabled = serializers.BooleanField()
    armed = serializers.BooleanField()
    pin = serializers.CharField(allow_null=True)
    expires_in_secs = serializers.IntegerField(allow_null=True)
    paired_clients = serializers.IntegerField()
    wrong_pins = serializers.IntegerField()
    closed_by_wrong_pins = serializers.BooleanField()


class ApproveSerializer(serializers.Serializer):
    name = serializers.CharField(required=False, help_text="pair it under this name instead")


class ArmSerializer(serializers.Serializer):
    ttl_secs = serializers.IntegerField(required=False, help_text="default 120, clamped 15-600")
    fingerprint = serializers.CharField(required=False, help_text="only this device may use it")
