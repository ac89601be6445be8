"""Console pages of what runs now: the live streams, the virtual displays and pairing.

The first two are static pages whose JavaScript reads the management routes with the
operator's session (`ConsoleMgmtAPIView`); "Pair a device" is the `/pin` form in the console
layout (the bare `/pin` stays for devices without a login) beside the waiting browsers.
"""

from __future__ import annotations

from hostmgmt.console.views import console_page, page


@console_page
def displays(request):
    return page(request, "displays.html")
