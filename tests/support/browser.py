"""Debian's headless Chromium as every browser test launches it (Playwright drives it)."""

CHROMIUM = "/usr/bin/chromium"
# Without the background-networking flags Chromium keeps dialling Google's hosts, which this
# closed network refuses; the rest keep a root, GPU-less CI box quiet.
ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
# The player page also needs media to start without a click, and host ICE candidates on
# loopback rather than mDNS names.
PLAYER_ARGS = [
    *ARGS,
    "--autoplay-policy=no-user-gesture-required",
    "--disable-features=WebRtcHideLocalIpsWithMdns",
]
