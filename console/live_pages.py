"""Console pages of what runs now: the live streams, the virtual displays and pairing.

The first two are static pages whose JavaScript reads the management routes with the
operator's session (`ConsoleMgmtAPIView`); "Pair a device" is the `/pin` form in the console
layout (the bare `/pin` stays for devices without a login) beside the waiting browsers.
"""

from __future__ import annotations

from django.views.decorators.csrf import csrf_protect
from django.views.decorators.http import require_http_methods

from console.views import console_page, page
from pairing import services


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
    ctx, status = services.pin_form(request.POST if request.method == "POST" else None)
    return page(request, "pair.html", ctx, status=status)
