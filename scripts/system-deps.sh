#!/bin/sh
# Installs the Debian packages the host drives (`run`) or the tests drive too (`test`), only
# those missing. Each entry: "check <command that proves it is there> <package> [test]";
# entries marked `test` are needed by the test suite only.
set -eu
MODE="${1:-test}"
NEEDED=""
check() {
    if [ "${3:-}" = "test" ] && [ "$MODE" != "test" ]; then
        return
    fi
    command -v "$1" >/dev/null 2>&1 || NEEDED="$NEEDED $2"
}
check Xvfb xvfb
check pulseaudio pulseaudio
check parec pulseaudio-utils
check chromium chromium test
check xdotool xdotool test
: placeholder

if [ -z "$NEEDED" ]; then
    exit 0
fi
echo "installing Debian packages:$NEEDED"
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends $NEEDED
