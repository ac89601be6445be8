from django.contrib import admin

from library.models import CustomEntry, InstalledTitle, ScannerState


@admin.register(InstalledTitle)
class InstalledTitleAdmin(admin.ModelAdmin):
    list_display = ("id", "store", "title_key", "install_dir")
    list_filter = ("store",)
    search_fields = ("id", "title_key")


@admin.register(CustomEntry)
class CustomEntryAdmin(admin.ModelAdmin):
    list_display = ("id", "title", "provider", "external_id", "updated_at")
    list_filter = ("provider",)
    search_fields = ("id", "title", "external_id")


@admin.register(ScannerState)
class ScannerStateAdmin(admin.ModelAdmin):
    list_display = ("id", "enabled", "count", "scanned_at")
