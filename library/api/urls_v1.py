"""Management API routes of the `library` app (mounted at /api/v1/)."""

urlpatterns: list = []
