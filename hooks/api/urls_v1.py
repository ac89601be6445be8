"""Management API routes of the `hooks` app (mounted at /api/v1/)."""

urlpatterns: list = []
