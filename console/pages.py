"""The first-run welcome page and the throttled Django admin login (the console's other pages
live in console)."""

from __future__ import annotations

from django.contrib import admin
from django.contrib.auth import login
from django.http import HttpResponse, HttpResponseRedirect
from django.shortcuts import render
from django.views.decorators.csrf import csrf_protect
from django.views.decorators.http import require_http_methods

from access import credentials, throttle
from access.backends import BACKEND, request_ip


@csrf_protect
@require_http_methods(["GET", "POST"])
def welcome(request):
    """Set the first admin credentials. Gone (redirect home) once they exist, also for the
    loser of two racing submissions."""
    if credentials.credentials_exist():
        return HttpResponseRedirect("/")
    error = ""
    username = ""
    if request.method == "POST":
        username = request.POST.get("username", "").strip()
        password = request.POST.get("password", "")
        confirm = request.POST.get("confirm", "")
        try:
            if password != confirm:
                raise credentials.CredentialError("The two passwords do not match.", "confirm")
            credentials.check_password_rules(username, password)
            user = credentials.create_first_admin(username, password)
        except credentials.AlreadySetUp:
            return HttpResponseRedirect("/")
        except credentials.CredentialError as exc:
            message = str(exc).rstrip(".") + "."
            error = message[0].upper() + message[1:]
            if exc.field == "password":
                error = f"Password: {error}"
        else:
            login(request, user, backend=BACKEND)
            return HttpResponseRedirect("/")
    status = 400 if error else 200
    return render(
        request, "welcome.html", {"error": error, "username": username or "admin"}, status=status
    )


def admin_login(request, extra_context=None):
    """Django admin's login behind the failed-login bucket: a blocked address gets 429 before
    any password is checked (the authentication backend counts the attempts)."""
    if request.method == "POST":
        try:
            wait = throttle.blocked_for(request_ip(request))
        except throttle.ThrottleUnavailable as exc:
            response = HttpResponse(exc.message + "\n", status=503, content_type="text/plain")
            response["Retry-After"] = str(throttle.RETRY_UNAVAILABLE_S)
            return response
        if wait:
            response = HttpResponse(
                "Too many failed logins; try again later.\n", status=429, content_type="text/plain"
            )
            response["Retry-After"] = str(int(wait) + 1)
            return response
    return admin.site.login(request, extra_context)
