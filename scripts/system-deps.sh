#!/bin/sh
# Installs the Debian packages the test suite needs, only those missing. Each entry is
# "<command that proves it is there> <package>". Later work appends its own lines.
set -eu
NEEDED=""
check() {
    command -v "$1" >/dev/null 2>&1 || NEEDED="$NEEDED $2"
}
# (command package) pairs; keep one per line.
check Xvfb xvfb
check chromium chromium
check pulseaudio pulseaudio
check parec pulseaudio-utils
check xdotool xdotool
: placeholder

if [ -z "$NEEDED" ]; then
    exit 0
fi
echo "installing Debian packages:$NEEDED"
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends $NEEDED
