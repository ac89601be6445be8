#!/bin/sh
# Installs the Debian packages the host drives (`run`) or the tests drive too (`test`), only
# those missing. Each entry: "check <command that proves it is there> <package> [test]", or
# "check_lib <shared library> <package> [test]" for a library a binary from PyPI loads, or
# "check_gst <element> <package> [test]" for a GStreamer plugin (outside ldconfig's paths);
# entries marked `test` are needed by the test suite only. scripts/fresh-root-check.sh proves the
# list complete on a fresh Debian 12 root (it also runs ldd over every binary the venv holds).
set -eu
MODE="${1:-test}"
NEEDED=""
check() {
    if [ "${3:-}" = "test" ] && [ "$MODE" != "test" ]; then
        return
    fi
    command -v "$1" >/dev/null 2>&1 || NEEDED="$NEEDED $2"
}
check_lib() {
    if [ "${3:-}" = "test" ] && [ "$MODE" != "test" ]; then
        return
    fi
    /sbin/ldconfig -p | grep -q "^[[:space:]]*$1 " || NEEDED="$NEEDED $2"
}
check_gst() {
    if [ "${3:-}" = "test" ] && [ "$MODE" != "test" ]; then
        return
    fi
    gst-inspect-1.0 "$1" >/dev/null 2>&1 || NEEDED="$NEEDED $2"
}
check Xvfb xvfb
check pulseaudio pulseaudio
check parec pulseaudio-utils
# Plugins run confined in a bubblewrap sandbox (docs/plugins.md); without it the runner starts no
# plugin unless the operator sets HOST_PLUGINS_UNCONFINED=1.
check bwrap bubblewrap
check chromium chromium test
check xdotool xdotool test
# A real wlroots compositor for the headless-mode tests (sway 1.7 brings swaybg), its Xwayland
# for X11 apps, and grim for bench/capture.py's comparison.
check sway sway test
check Xwayland xwayland test
check grim grim test
check swaybg swaybg test
# Playwright's driver is a Node.js binary from the playwright wheel; ldd on a fresh root shows
# libatomic.so.1 as the one library it needs that minbase lacks (Debian's chromium brings its own).
check_lib libatomic.so.1 libatomic1 test
# GNOME capture (`capture = gnome`, media/mutter/, docs/desktop-capture.md): gst-launch with
# pipewiresrc reads the ScreenCast stream (the person's desktop runs PipeWire itself, and mutter).
check gst-launch-1.0 gstreamer1.0-tools
check_gst pipewiresrc gstreamer1.0-pipewire
check_gst videoconvert gstreamer1.0-plugins-base
# The tests run their own headless GNOME: mutter, PipeWire + WirePlumber, a session bus, and
# foot (a native Wayland terminal) as a known picture.
check mutter mutter test
check pipewire pipewire test
check wireplumber wireplumber test
check pw-dump pipewire-bin test
check dbus-daemon dbus-daemon test
check foot foot test
# Portal capture (`capture = portal`, media/portal/, docs/portal-capture.md) needs nothing more
# to run: the person's desktop brings its portal, and the frames come through gst-launch as
# above. The tests run the real portals: the front end, the wlroots backend on their sway,
# and GNOME's backend (whose real dialog they answer) on their headless mutter. The portals
# live in /usr/libexec, off PATH: checked by path.
check /usr/libexec/xdg-desktop-portal xdg-desktop-portal test
check /usr/libexec/xdg-desktop-portal-wlr xdg-desktop-portal-wlr test
check /usr/libexec/xdg-desktop-portal-gnome xdg-desktop-portal-gnome test
# The KDE tests run their own KWin 5.27 (`kwin_wayland --virtual`, tests/support/kde.py) with
# the same PipeWire, session bus and GStreamer pieces; `capture = kwin` on a person's desktop
# needs only the GStreamer packages above (docs/kde-capture.md).
check kwin_wayland kwin-wayland test
# Several real hosts on one machine, each in its own network namespace on a private LAN
# (tests/support/netns_hosts.py): `ip netns`, veth, bridge and `tc`.
check ip iproute2 test
# `systemd-analyze verify` checks the user unit install_user_service writes.
check systemd-analyze systemd test

if [ -z "$NEEDED" ]; then
    exit 0
fi
echo "installing Debian packages:$NEEDED"
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends $NEEDED
