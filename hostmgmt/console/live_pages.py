"""Console pages of what runs now: the live streams, the virtual displays and pairing.

The first two are static pages whose JavaScript reads the management routes with the
operator's session (`ConsoleMgmtAPIView`); "Pair a device" is the `/pin` form in the console
layout (the bare `/pin` stays for devices without a login) beside the waiting browsers.
"""

from __future__ import annotations

from django.views.decorators.csrf import csrf_protect
from django.views.decorators.http import require_http_methods

from hostmgmt.console.views import console_page, page


@console_page
def streaming(request):
    return page(request, "streaming.html")


@console_page
def displays(request):
    return page(request, "displays.html")


@console_page
@csrf_protect
@require_http_methods(["GET", "POST"])
def pair(request):
    from pairing import services

    message, error, status, name = "", "", 200, ""
    if request.method == "POST":
        name = request.POST.get("name", "")
        try:
            if services.submit_pin(request.POST.get("pin", ""), name):
                message, name = "PIN accepted. Finish pairing on the device.", ""
            else:
                error, status = "No device is waiting for a PIN. Start pairing on the device.", 409
        except services.PinError:
            error, status = "The PIN must be 4 digits (0000 to 9999).", 400
    ctx = {"message": message, "error": error, "name": name,
           "pending": services.pending_requests()}  # fmt: skip
    return page(request, "pair.html", ctx, status=status)
