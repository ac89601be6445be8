"""Admin API routes of the `pairing` app (mounted at /api/)."""

urlpatterns: list = []
