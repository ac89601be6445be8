from django.contrib import admin

from pairing.models import PairedClient, PinRequest


@admin.register(PairedClient)
class PairedClientAdmin(admin.ModelAdmin):
    list_display = ("name", "fingerprint", "enabled", "plane", "paired_at", "last_seen")
    list_filter = ("enabled", "plane")
    search_fields = ("name", "fingerprint", "uuid")
    readonly_fields = ("fingerprint", "cert_pem", "uuid", "paired_at", "last_seen")


@admin.register(PinRequest)
class PinRequestAdmin(admin.ModelAdmin):
    list_display = ("device_name", "remote_addr", "fingerprint", "created_at", "expires_at")
    # The derived key is a secret for the few hundred milliseconds it exists: never shown.
    exclude = ("key_hex", "salt_hex")
