"""Django admin of the `streaming` app: session history (console issue); other models of the
app add their registrations below."""

from django.contrib import admin

from streaming.models import SessionRecord


@admin.register(SessionRecord)
class SessionRecordAdmin(admin.ModelAdmin):
    list_display = (
        "t_start",
        "t_end",
        "session_id",
        "app_name",
        "client_name",
        "plane",
        "codec",
        "width",
        "height",
        "fps",
        "avg_bitrate_kbps",
        "avg_rtt_ms",
        "dropped_frames",
        "error",
    )
    list_filter = ("plane", "codec", "app_name", "client_name")
    search_fields = ("session_id", "app_name", "client_name", "client_address",
                     "client_fingerprint", "error")  # fmt: skip
    date_hierarchy = "t_start"
    ordering = ("-t_start",)
    # History is what the host recorded; editing it would falsify the record.
    readonly_fields = [f.name for f in SessionRecord._meta.fields]

    def has_add_permission(self, request):
        return False
