"""The player page and its signalling endpoint, on the host's HTTPS port (same origin).

`/play` is open to any browser on the network: who may play is decided per device by the
operator (pending -> approve), not by a login. `POST /native/offer` is CSRF-protected by
Django's cookie + `X-CSRFToken` check (same-origin pages only; a refusal is a JSON 403 the page
can show), accepts JSON only and is rate-limited per address and per device (429).
"""

from __future__ import annotations

from django.http import HttpResponse, HttpResponseRedirect
from django.shortcuts import render
from django.utils.http import urlencode
from django.views.decorators.csrf import csrf_exempt, ensure_csrf_cookie
from django.views.decorators.http import require_GET, require_POST
from drf_spectacular.utils import extend_schema
from rest_framework.authentication import BaseAuthentication
from rest_framework.exceptions import PermissionDenied
from rest_framework.response import Response
from rest_framework.throttling import BaseThrottle
from rest_framework.views import APIView

from access import identity
from access.admin import client_ip
from access.mgmt import csrf_failure
from common.errors import DomainError, Invalid, TooLarge
from fleet import place as fleet
from fleet import tickets
from native import services
from native.api.serializers import OfferSerializer, PlaceSerializer
from streaming.sessions import apps

MAX_OFFER_BYTES = 64 * 1024
MAX_PLACE_BYTES = 4 * 1024
CSP = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; media-src 'self' blob:; object-src 'none'; base-uri 'none'; "
    "frame-ancestors 'none'"
)
MODES = ["1280x720", "1920x1080", "2560x1440", "3840x2160"]
RATES = [30, 60, 120]


@require_GET
@ensure_csrf_cookie
def play(request):
    """The player. Also lists the titles of this host's fleet members (placed through
    `/play/place`), and, for a browser a fleet host placed here (`/play/fleet`), preselects
    its app and says who placed it."""
    placed = tickets.peek(request.COOKIES.get(tickets.COOKIE))
    query = request.GET
    ctx = {
        "apps": apps.choices(),
        "modes": MODES,
        "rates": RATES,
        "fleet_titles": fleet.member_titles(),
        "placed": placed,
        "here": identity.host_name() if placed else "",
        "chosen_app": placed.app if placed else query.get("app", ""),
        "chosen_mode": query.get("mode", "") if query.get("mode") in MODES else MODES[0],
        "chosen_fps": int(query["fps"]) if query.get("fps") in {str(r) for r in RATES} else 60,
    }
    response = render(request, "native/play.html", ctx)
    response["Content-Security-Policy"] = CSP
    response["Cache-Control"] = "no-store"
    return response


@csrf_exempt  # a fleet host's page posts here across sites; the one-use ticket is the check
@require_POST
def fleet_handoff(request):
    """A fleet host hands a player over: the form POST carries its one-use ticket (never a
    URL). A good ticket becomes a short-lived approval cookie and a 303 to this host's /play
    with the app preselected; anything else is a 403 page and nothing is set."""
    try:
        services.limit("ip", client_ip(request))
    except DomainError as exc:
        return HttpResponse(exc.message, status=exc.status, content_type="text/plain")
    redeemed = tickets.redeem(request.POST.get("ticket"))
    if redeemed is None:
        return HttpResponse(
            "This placement is unknown, used or expired: go back and choose the title again.",
            status=403,
            content_type="text/plain",
        )
    vouched, cookie = redeemed
    query = {"app": vouched.app}
    if request.POST.get("mode") in MODES:
        query["mode"] = request.POST["mode"]
    if request.POST.get("fps") in {str(r) for r in RATES}:
        query["fps"] = request.POST["fps"]
    response = HttpResponseRedirect("/play?" + urlencode(query), status=303)
    response.set_cookie(
        tickets.COOKIE,
        cookie,
        max_age=tickets.APPROVAL_TTL_S,
        secure=True,
        httponly=True,
        samesite="Lax",
    )
    response["Cache-Control"] = "no-store"
    return response


class SamePageOnly(BaseAuthentication):
    """No login (the device is the credential), but Django's CSRF check: only the host's own
    page may post an offer. Refused as a JSON 403, before the offer is counted."""

    def authenticate(self, request):
        reason = csrf_failure(request._request)
        if reason:
            raise PermissionDenied(f"CSRF check failed: {reason}")
        return None


class AddressLimit(BaseThrottle):
    """Every offer counts against its source address, before any parsing (429 past it)."""

    def allow_request(self, request, view) -> bool:
        services.limit("ip", client_ip(request))
        return True


def _invalid(errors: dict) -> Invalid:
    """The first message is what the player shows; every field's is in `fields`."""
    flat = {
        str(field): "; ".join(str(m) for m in (msgs if isinstance(msgs, list) else [msgs]))
        for field, msgs in errors.items()
    }
    return Invalid(next(iter(flat.values())), fields=flat)


class OfferView(APIView):
    """`{sdp, name, app, width, height, fps, pin?, transport?}` -> 200 answer | 202 pending."""

    authentication_classes = [SamePageOnly]
    permission_classes: list = []
    throttle_classes = [AddressLimit]
    error_shape = "v1"  # `{"error", "fields"?}`, as the player reads it

    @extend_schema(exclude=True)
    def post(self, request):
        if len(request.body) > MAX_OFFER_BYTES:
            raise TooLarge("offer too large")
        offer = OfferSerializer(data=request.data)  # 415 unless JSON, 400 when malformed
        if not offer.is_valid():
            raise _invalid(offer.errors)
        data = offer.validated_data
        cookie = request.COOKIES.get(tickets.COOKIE)
        used = services.vouched(cookie, data["fingerprint"], data["app"])
        result = services.offer(data, client_ip(request))
        response = Response(result, status=202 if result["status"] == "pending" else 200)
        if used:
            response.delete_cookie(tickets.COOKIE, samesite="Lax")
        return response


class PlaceLimit(BaseThrottle):
    """Every placement request counts against its source address (429 past it)."""

    def allow_request(self, request, view) -> bool:
        services.limit("place", client_ip(request))
        return True


class PlaceView(APIView):
    """`{app, title, name, fingerprint, pin?}` -> 200 `{member, handoff}` | 202 pending.

    Who may place: whoever may play on this host. The page's device must be paired here (by
    the operator or a PIN, through the same knock as an offer); an unknown one is queued for
    approval and the page asks again. Same-origin (CSRF) and counted per address."""

    authentication_classes = [SamePageOnly]
    permission_classes: list = []
    throttle_classes = [PlaceLimit]
    error_shape = "v1"

    @extend_schema(exclude=True)
    def post(self, request):
        if len(request.body) > MAX_PLACE_BYTES:
            raise TooLarge("request too large")
        body = PlaceSerializer(data=request.data)
        if not body.is_valid():
            raise _invalid(body.errors)
        data = body.validated_data
        result = services.place(data, client_ip(request))
        response = Response(result, status=202 if result["status"] == "pending" else 200)
        response["Cache-Control"] = "no-store"
        return response
