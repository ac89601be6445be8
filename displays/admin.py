"""Django admin of the `displays` app."""

from django.contrib import admin

from displays.models import CustomPreset, VirtualDisplay


@admin.register(VirtualDisplay)
class VirtualDisplayAdmin(admin.ModelAdmin):
    """Read-only: the state machine owns these rows (release them through the API)."""

    list_display = ("slot", "state", "mode", "backend", "client", "sessions", "deadline", "pid")
    list_filter = ("state", "backend")
    search_fields = ("client",)
    readonly_fields = [f.name for f in VirtualDisplay._meta.fields]

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False


@admin.register(CustomPreset)
class CustomPresetAdmin(admin.ModelAdmin):
    list_display = ("id", "name", "game_session", "created_at")
    search_fields = ("name",)
    readonly_fields = ("id", "created_at")

    def has_add_permission(self, request):
        return False  # ids are host-assigned: create presets through the API
