"""The first-run welcome page (the console's other pages live in hostmgmt.console)."""

from __future__ import annotations

from django.contrib.auth import login
from django.http import HttpResponseRedirect
from django.shortcuts import render
from django.views.decorators.csrf import csrf_protect
from django.views.decorators.http import require_http_methods

from hostmgmt.auth import credentials


@csrf_protect
@require_http_methods(["GET", "POST"])
def welcome(request):
    """Set the first admin credentials. Gone (redirect home) once they exist."""
    if credentials.credentials_exist():
        return HttpResponseRedirect("/")
    error = ""
    username = ""
    if request.method == "POST":
        username = request.POST.get("username", "").strip()
        password = request.POST.get("password", "")
        confirm = request.POST.get("confirm", "")
        if password != confirm:
            error = "The two passwords do not match."
        else:
            try:
                credentials.set_credentials(username, password)
            except credentials.CredentialError as exc:
                error = str(exc).capitalize() + "."
            else:
                user = credentials.admin_user()
                login(request, user, backend="django.contrib.auth.backends.ModelBackend")
                return HttpResponseRedirect("/")
    status = 400 if error else 200
    return render(
        request, "welcome.html", {"error": error, "username": username or "admin"}, status=status
    )
