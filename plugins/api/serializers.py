"""Shapes of the plugin routes (documentation and request validation for the runtime switch;
registrations are validated in plugins.registry, one rule set for every caller)."""

from rest_framework import serializers


class PluginUiSerializer(serializers.Serializer):
    port = serializers.IntegerField(min_value=1024, max_value=65535, help_text="loopback only")
    secret = serializers.CharField(help_text="16-128 of [A-Za-z0-9_-]; never listed")
    icon = serializers.CharField(required=False, help_text="1-48 of [a-z0-9-]")


class PluginRegistrationSerializer(serializers.Serializer):
    title = serializers.CharField(help_text="control characters stripped, trimmed, 1-64")
    version = serializers.CharField(required=False, help_text="at most 32; blank = absent")
    ui = PluginUiSerializer(required=False)


class PluginUiPublicSerializer(serializers.Serializer):
    port = serializers.IntegerField()
    icon = serializers.CharField(required=False)


class PluginSummarySerializer(serializers.Serializer):
    id = serializers.CharField()
    title = serializers.CharField()
    version = serializers.CharField(required=False)
    ui = PluginUiPublicSerializer(required=False)


class UiCredentialSerializer(serializers.Serializer):
    port = serializers.IntegerField()
    secret = serializers.CharField()


class RuntimeViewSerializer(serializers.Serializer):
    installed = serializers.BooleanField(help_text="the runner ships with the host: always true")
    enabled = serializers.BooleanField(help_text="the persisted switch")
    running = serializers.BooleanField(help_text="the runner is up and reporting")
    unit = serializers.CharField(help_text="what runs the plugins")
    principal = serializers.CharField(required=False)
    detail = serializers.CharField(required=False)
    confined = serializers.BooleanField(
        required=False, help_text="the runner confines each plugin (bubblewrap)"
    )
    confinement = serializers.CharField(
        required=False, help_text='"confined (bubblewrap)" or "not confined: <why>"'
    )
    refused = serializers.CharField(
        required=False, help_text="why the runner runs no plugin (e.g. no management token)"
    )


class RuntimeRequestSerializer(serializers.Serializer):
    enabled = serializers.BooleanField()
