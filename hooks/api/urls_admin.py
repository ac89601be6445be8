"""Admin API routes of the `hooks` app (mounted at /api/)."""

urlpatterns: list = []
