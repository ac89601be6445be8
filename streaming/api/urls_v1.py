"""Management API routes of the `streaming` app (mounted at /api/v1/)."""

urlpatterns: list = []
