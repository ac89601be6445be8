"""The player page and its signalling endpoint, on the host's HTTPS port (same origin).

`/play` is open to any browser on the network: who may play is decided per device by the
operator (pending -> approve), not by a login. `POST /native/offer` is CSRF-protected by
Django's cookie + `X-CSRFToken` check (same-origin pages only; a refusal is a JSON 403 the page
can show), accepts JSON only and is rate-limited per address and per device (429).
"""

from __future__ import annotations

from django.shortcuts import render
from django.views.decorators.csrf import ensure_csrf_cookie
from django.views.decorators.http import require_GET
from drf_spectacular.utils import extend_schema
from rest_framework.authentication import BaseAuthentication
from rest_framework.exceptions import PermissionDenied
from rest_framework.response import Response
from rest_framework.throttling import BaseThrottle
from rest_framework.views import APIView

from access.admin import client_ip
from access.mgmt import csrf_failure
from common.errors import Invalid, TooLarge
from native import services
from native.api.serializers import OfferSerializer
from streaming.sessions import apps

MAX_OFFER_BYTES = 64 * 1024
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
    ctx = {"apps": apps.choices(), "modes": MODES, "rates": RATES}
    response = render(request, "native/play.html", ctx)
    response["Content-Security-Policy"] = CSP
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
        result = services.offer(offer.validated_data, client_ip(request))
        return Response(result, status=202 if result["status"] == "pending" else 200)
