"""`/api/v1/plugins...` and `/api/v1/store...` routes."""

urlpatterns: list = []
