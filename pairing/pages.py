"""The operator's PIN page (`/pin`): a plain form, no JavaScript, for the PIN a client shows.

Signed-in console users (Django session) and HTTP Basic admin credentials may use it; anyone
else gets a Basic challenge, so a browser simply asks for the admin name and password.
"""

from __future__ import annotations

import base64
import binascii

from django.http import HttpResponse, HttpResponseRedirect
from django.shortcuts import render
from django.views.decorators.csrf import csrf_protect
from django.views.decorators.http import require_http_methods

from access import credentials, throttle
from access.admin import REALM
from pairing import services


def _basic_user(request):
    header = request.headers.get("Authorization", "")
    scheme, _, value = header.partition(" ")
    if scheme.lower() != "basic" or not value:
        return None
    try:
        username, _, password = base64.b64decode(value, validate=True).decode().partition(":")
    except (binascii.Error, UnicodeDecodeError, ValueError):
        return None
    ip = request.META.get("REMOTE_ADDR", "")
    try:
        if throttle.blocked_for(ip):
            return None
        user = credentials.verify(username, password)
        if user is None:
            throttle.record_failure(ip)
        else:
            throttle.record_success(ip)
    except throttle.ThrottleUnavailable:
        return None  # uncounted guesses are refused like wrong ones
    return user


def _is_admin(request) -> bool:
    user = getattr(request, "user", None)
    if user is not None and user.is_authenticated and user.is_superuser:
        return True
    return _basic_user(request) is not None


@csrf_protect
@require_http_methods(["GET", "POST"])
def pin_page(request):
    if not credentials.credentials_exist():
        return HttpResponseRedirect("/welcome")
    if not _is_admin(request):
        response = HttpResponse("Sign in with the host's admin credentials.", status=401)
        response["WWW-Authenticate"] = REALM
        return response
    context, status = services.pin_form(request.POST if request.method == "POST" else None)
    return render(request, "pairing/pin.html", context, status=status)
