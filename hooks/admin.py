"""Django admin: lets an operator see why a hook did not do what they expected."""

from django.contrib import admin

from hooks.models import Delivery, PrepRun


@admin.register(Delivery)
class DeliveryAdmin(admin.ModelAdmin):
    list_display = (
        "created",
        "channel",
        "event_kind",
        "event_seq",
        "target",
        "outcome",
        "exit_code",
        "http_status",
        "duration_ms",
    )
    list_filter = ("channel", "outcome", "event_kind")
    search_fields = ("target", "error", "event_kind")
    readonly_fields = [f.name for f in Delivery._meta.fields]

    def has_add_permission(self, request):
        return False


@admin.register(PrepRun)
class PrepRunAdmin(admin.ModelAdmin):
    list_display = ("session_key", "position", "undo", "created")
    search_fields = ("session_key",)
