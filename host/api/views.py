"""Platform routes of both APIs: health, host identity, CSRF tokens, first-run credentials."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema
from rest_framework.exceptions import Throttled
from rest_framework.response import Response

from access import credentials, throttle
from access import csrf as csrf_rules
from access.admin import AdminPrincipal, client_ip
from apikit import shapes
from apikit.base import AdminAPIView, MgmtAPIView, OpenMgmtAPIView, json_object
from apikit.errors import ApiError
from host import hostinfo, services
from hostconfig import store


class V1HealthView(OpenMgmtAPIView):
    """Liveness; the one management route that needs no token."""

    @extend_schema(responses=shapes.HealthSerializer)
    def get(self, request):
        return Response(services.health())


class V1HostView(MgmtAPIView):
    """Identity, versions, the codecs the encoders here really open, and the port map."""

    @extend_schema(
        responses=shapes.HostInfoSerializer, description="Host info (identity, codecs, ports)."
    )
    def get(self, request):
        return Response(hostinfo.host_info())


class AdminHealthView(AdminAPIView):
    authentication_classes: list = []
    permission_classes: list = []

    @extend_schema(responses=shapes.HealthSerializer)
    def get(self, request):
        return Response(services.health())


class ConfigLocaleView(AdminAPIView):
    authentication_classes: list = []
    permission_classes: list = []

    @extend_schema(responses=shapes.ConfigLocaleSerializer)
    def get(self, request):
        return Response({"status": True, "locale": store.read_raw().get("locale", "en")})


class CsrfTokenView(AdminAPIView):
    """Any authenticated caller may mint a token for its own client id."""

    scopes = {"GET": None}

    @extend_schema(responses=shapes.CsrfTokenSerializer)
    def get(self, request):
        principal: AdminPrincipal = request.user
        return Response({"csrf_token": csrf_rules.mint(principal.client_id)})


_API_FIELDS = {"username": "newUsername", "password": "newPassword"}


class PasswordView(AdminAPIView):
    """Set or change the admin credentials; unauthenticated until the first credentials exist."""

    def initial(self, request, *args, **kwargs):
        self.first_run = not credentials.credentials_exist()
        super().initial(request, *args, **kwargs)

    def check_permissions(self, request):
        if self.first_run:
            # Unauthenticated on first run, but still CSRF-checked for browsers.
            reason = csrf_rules.check(request, request.META.get("REMOTE_ADDR", ""))
            if reason:
                raise ApiError(403, reason)
            return
        super().check_permissions(request)

    @extend_schema(
        request=shapes.PasswordRequestSerializer,
        responses={200: shapes.AdminStatusSerializer},
        description="Unauthenticated until the first credentials exist (CSRF-checked for "
        "browsers); afterwards `currentUsername`/`currentPassword` must match (a failed guess "
        "counts against the login bucket: 429). 401 when a racing first run already won.",
    )
    def post(self, request):
        body = json_object(request)
        fields = ("currentUsername", "currentPassword", "newUsername", "newPassword")
        values = {f: body.get(f, "") for f in (*fields, "confirmNewPassword")}
        if any(not isinstance(v, str) for v in values.values()):
            raise ApiError(400, "credential fields must be strings")
        new_username = values["newUsername"] or values["currentUsername"]
        if not new_username:
            raise ApiError(400, "invalid username")
        if not values["newPassword"]:
            raise ApiError(400, "new password must not be empty")
        if values["newPassword"] != values["confirmNewPassword"]:
            raise ApiError(400, "password mismatch")
        if not self.first_run:
            # The current password is a password guess like any login: same bucket.
            ip = client_ip(request)
            wait = throttle.blocked_for(ip)
            if wait:
                raise Throttled(wait=wait, detail="too many failed logins; try again later")
            user = credentials.verify(values["currentUsername"], values["currentPassword"])
            if user is None:
                throttle.record_failure(ip)
                raise ApiError(400, "invalid current credentials")
            throttle.record_success(ip)
        try:
            credentials.check_password_rules(new_username, values["newPassword"])
            if self.first_run:
                credentials.create_first_admin(new_username, values["newPassword"])
            else:
                credentials.set_credentials(new_username, values["newPassword"])
        except credentials.AlreadySetUp:
            # A racing first-run request won: this one is an unauthenticated change now.
            raise ApiError(
                401, "admin credentials are already set; sign in to change them"
            ) from None
        except credentials.CredentialError as exc:
            field = _API_FIELDS.get(exc.field or "")
            raise ApiError(400, f"{field}: {exc}" if field else str(exc)) from None
        return Response({"status": True, "status_code": 200})
