"""Management API routes of the `pairing` app (mounted at /api/v1/)."""

urlpatterns: list = []
