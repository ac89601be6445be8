"""Admin API routes of the `streaming` app (mounted at /api/)."""

urlpatterns: list = []
