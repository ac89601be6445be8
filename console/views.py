"""Web console pages: Django templates plus a little same-origin JavaScript.

Pages need the admin's Django session (set by /welcome or /login). The browser then calls the
admin API with that session (AdminAuthentication accepts it) and never holds the management
token: the two v1 facts the dashboard needs, the runtime status and the event stream, are
relayed here under /console/ with the same session check.
"""

from __future__ import annotations

from functools import wraps

from django.contrib.auth import login, logout
from django.http import HttpResponseRedirect, JsonResponse
from django.shortcuts import render
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.csrf import csrf_protect
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from access import credentials, throttle
from access.admin import client_ip
from access.backends import BACKEND
from access.scopes import SCOPES
from console import configform, runtime, telemetry, updater
from fleet import identity as fleet_identity
from hooks import sse
from hooks.event_kinds import DOMAINS, KINDS
from host import services
from hostconfig import store
from streaming import preflight

CSP = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; "
    "frame-ancestors 'none'"
)
NAV = [
    ("/", "Dashboard"),
    ("/clients", "Clients"),
    ("/apps", "Apps"),
    ("/library", "Library"),
    ("/hooks", "Hooks"),
    ("/store", "Store"),
    ("/config", "Configuration"),
    ("/sessions", "Sessions"),
    ("/tokens", "Tokens"),
    ("/fleet", "Fleet"),
    ("/logs", "Logs"),
]


def _harden(response):
    response["Content-Security-Policy"] = CSP
    response["Cache-Control"] = "no-store"
    return response


def _is_admin(request) -> bool:
    user = getattr(request, "user", None)
    return bool(user is not None and user.is_authenticated and user.is_superuser)


def console_page(view):
    """Session admin only: first run goes to /welcome, everyone else to /login."""

    @wraps(view)
    def wrapper(request, *args, **kwargs):
        if not credentials.credentials_exist():
            return HttpResponseRedirect("/welcome")
        if not _is_admin(request):
            return HttpResponseRedirect(f"/login?next={request.path}")
        return _harden(view(request, *args, **kwargs))

    return wrapper


def page(request, template: str, context: dict | None = None, status: int = 200):
    ctx = {"nav": NAV, "here": request.path, **(context or {})}
    return render(request, f"console/{template}", ctx, status=status)


@csrf_protect
@require_http_methods(["GET", "POST"])
def login_view(request):
    if not credentials.credentials_exist():
        return HttpResponseRedirect("/welcome")
    target = request.POST.get("next") or request.GET.get("next") or "/"
    if not url_has_allowed_host_and_scheme(target, allowed_hosts=None) or not target.startswith(
        "/"
    ):
        target = "/"
    error, status, username = "", 200, ""
    if request.method == "POST":
        ip = client_ip(request)
        username = request.POST.get("username", "")
        try:
            wait = throttle.blocked_for(ip)
            if wait:
                error, status = f"Too many failed logins; try again in {int(wait) + 1} s.", 429
            else:
                user = credentials.verify(username, request.POST.get("password", ""))
                if user is None:
                    throttle.record_failure(ip)
                    error, status = "Wrong username or password.", 400
                else:
                    throttle.record_success(ip)
                    login(request, user, backend=BACKEND)
                    return HttpResponseRedirect(target)
        except throttle.ThrottleUnavailable as exc:
            error, status = exc.message, 503
    response = render(
        request,
        "console/login.html",
        {"error": error, "next": target, "username": username},
        status=status,
    )
    if status == 503:
        response["Retry-After"] = str(throttle.RETRY_UNAVAILABLE_S)
    return _harden(response)


@require_POST
@csrf_protect
def logout_view(request):
    logout(request)
    return HttpResponseRedirect("/login")


@console_page
def dashboard(request):
    return page(
        request,
        "dashboard.html",
        {
            "host": services.host_info(),
            "health": services.health(),
            "kinds": sorted(KINDS),
            "update": updater.status(),
            "capture": preflight.capture_summary(),
        },
    )


@console_page
def clients(request):
    return page(request, "clients.html")


@console_page
def apps(request):
    return page(request, "apps.html")


@console_page
def library(request):
    return page(request, "library.html")


@console_page
def hooks(request):
    patterns = sorted(KINDS) + sorted(f"{d}.*" for d in DOMAINS)
    return page(request, "hooks.html", {"patterns": patterns})


@console_page
def fleet(request):
    return page(request, "fleet.html", {"identity": fleet_identity.describe()})


@console_page
def plugin_store(request):
    return page(request, "store.html")


@console_page
def sessions(request):
    return page(request, "sessions.html")


@console_page
def tokens(request):
    return page(request, "tokens.html", {"scopes": sorted(SCOPES)})


@console_page
def logs(request):
    return page(request, "logs.html")


@console_page
@csrf_protect
@require_http_methods(["GET", "POST"])
def config(request):
    if request.method == "POST":
        changed = configform.changes(request.POST)
        try:
            result = configform.save(changed)
        except store.ConfigError as exc:
            ctx = {
                "groups": configform.groups(request.POST, exc.fields),
                "error": f"{len(exc.fields)} value(s) need fixing; nothing was saved.",
                "problems": store.problems(),
            }
            return page(request, "config.html", ctx, status=400)
        except Exception as exc:  # Failed from the service (500 write failure)
            message = getattr(exc, "message", "the configuration could not be saved")
            ctx = {"groups": configform.groups(), "error": message, "problems": store.problems()}
            return page(request, "config.html", ctx)
        flag = "restart" if result["restart_required"] else "saved"
        return HttpResponseRedirect(f"/config?{flag}={result['saved']}")
    saved = request.GET.get("saved") or request.GET.get("restart")
    ctx = {
        "groups": configform.groups(),
        "saved": saved if (saved or "").isdigit() else "",
        "restart": "restart" in request.GET,
        "problems": store.problems(),
    }
    return page(request, "config.html", ctx)


@require_GET
def status_json(request):
    """Runtime snapshot plus health and telemetry for the dashboard (session admin only)."""
    if not _is_admin(request):
        return JsonResponse({"error": "log in first"}, status=401)
    body = {
        "status": runtime.snapshot(),
        "health": services.health(),
        "telemetry": telemetry.read(),
    }
    return _harden(JsonResponse(body, json_dumps_params={"separators": (",", ":")}))


async def events_stream(request):
    """The lifecycle event stream for the console, behind the admin session instead of the
    management token. Query and resume rules are those of GET /api/v1/events."""
    user = await request.auser()
    if not (user.is_authenticated and user.is_superuser):
        return JsonResponse({"error": "log in first"}, status=401)
    return await sse.stream_response(request)
