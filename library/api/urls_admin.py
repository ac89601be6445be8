"""Admin API routes of the `library` app (mounted at /api/)."""

urlpatterns: list = []
