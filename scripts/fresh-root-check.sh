#!/usr/bin/env bash
# Runs the README's test command the way a newcomer meets it: a clean clone of this repo's HEAD
# inside a throw-away Debian 12 root (debootstrap minbase plus what a new Debian 12 box has:
# python3 with venv and pip, make, git, curl; empty apt lists; no Redis, Xvfb, browser or
# compiler). Anything `make test` forgets to install fails here instead of on a newcomer's machine.
#
#   sudo scripts/fresh-root-check.sh            # make test (the whole suite)
#   sudo scripts/fresh-root-check.sh test-fast  # any other make target and arguments, e.g.
#   sudo scripts/fresh-root-check.sh test PYTEST_ARGS="tests/console/test_browser.py"
#
# Needs root and unshare on a Debian-like machine with network access to the Debian mirror and
# PyPI (debootstrap is installed when missing). The pristine base root is cached as a tarball (FRESH_ROOT_CACHE) so a rerun
# skips debootstrap; each run unpacks it anew, so nothing installed by one run leaks into the next.
# The root shares the machine's network: do not run it beside another test run of this repo
# (both would bind the same loopback ports).
set -euo pipefail

[ "$#" -gt 0 ] || set -- test
TARGET="$(printf '%q ' "$@")"
REPO="$(cd "$(dirname "$0")/.." && pwd)"
WORK="${FRESH_ROOT_DIR:-/var/tmp/hostmgmt-fresh-root}"
CACHE="${FRESH_ROOT_CACHE:-/var/tmp/hostmgmt-fresh-root-base.tar}"
MIRROR="${FRESH_ROOT_MIRROR:-http://deb.debian.org/debian}"
# What a new Debian 12 box has on top of minbase (the README's promise).
BASE_PACKAGES="python3,python3-venv,python3-pip,make,git,ca-certificates,curl,procps"

[ "$(id -u)" -eq 0 ] || { echo "fresh-root-check: run as root (debootstrap, pivot_root)" >&2; exit 2; }
if ! command -v debootstrap >/dev/null; then
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq debootstrap
fi

if [ ! -s "$CACHE" ]; then
    echo "fresh-root-check: debootstrap bookworm (minbase) into a cache tarball"
    staging="$(mktemp -d /var/tmp/hostmgmt-debootstrap.XXXXXX)"
    chmod 0755 "$staging"
    debootstrap --variant=minbase --include="$BASE_PACKAGES" bookworm "$staging" "$MIRROR"
    cat >"$staging/etc/apt/sources.list" <<EOF
deb $MIRROR bookworm main
deb $MIRROR bookworm-updates main
deb http://deb.debian.org/debian-security bookworm-security main
EOF
    # A new box has empty package lists and no downloaded .debs.
    rm -rf "$staging"/var/lib/apt/lists/* "$staging"/var/cache/apt/archives/*.deb
    tar -C "$staging" -cf "$CACHE.tmp" .
    mv "$CACHE.tmp" "$CACHE"
    rm -rf "$staging"
fi

rm -rf "$WORK"
mkdir -p "$WORK"
tar -C "$WORK" -xf "$CACHE"
chmod 0755 "$WORK"  # "/" of the root: the tarball's "." may carry mktemp's 0700
cp /etc/resolv.conf "$WORK/etc/resolv.conf" 2>/dev/null || true
# debootstrap writes no /etc/hosts; Debian's installer maps the machine's name to 127.0.1.1.
printf '127.0.0.1\tlocalhost\n127.0.1.1\t%s\n::1\t\tlocalhost ip6-localhost ip6-loopback\n' \
    "$(hostname)" >"$WORK/etc/hosts"
hostname >"$WORK/etc/hostname"
# Where this machine reaches the registries through a TLS-intercepting proxy, its local CA
# certificates go along (and pip is pointed at the system bundle, since a pip upgraded from PyPI
# carries its own); nothing else of this machine does.
PIP_CERT_ENV=""
if compgen -G "/usr/local/share/ca-certificates/*.crt" >/dev/null; then
    cp /usr/local/share/ca-certificates/*.crt "$WORK/usr/local/share/ca-certificates/"
    chroot "$WORK" update-ca-certificates >/dev/null
    PIP_CERT_ENV="PIP_CERT=/etc/ssl/certs/ca-certificates.crt"
fi
# A clean clone of what is committed, as CI takes it; shared/ beside it, read-only, as CI has it.
git clone --quiet --no-local "$REPO" "$WORK/root/work/main"
if [ -d "$REPO/../shared" ]; then
    cp -r "$REPO/../shared" "$WORK/root/work/shared"
    chmod -R a-w "$WORK/root/work/shared"
fi

echo "fresh-root-check: make $TARGET in $WORK (commit $(git -C "$REPO" rev-parse --short HEAD))"
# Own mount and PID namespaces: every mount and every process the run leaves behind goes with it.
# The root becomes "/" by pivot_root, not chroot: the kernel refuses new user namespaces to a
# chrooted process, and a fresh box has no such limit (the plugins' bubblewrap sandbox needs one).
status=0
unshare --mount --pid --fork --propagation private bash -euo pipefail -c '
    root="$1"; target="$2"; pip_cert="$3"
    mount --bind "$root" "$root"
    mount -t proc proc "$root/proc"
    mount -t sysfs sys "$root/sys"
    mount --rbind /dev "$root/dev"
    mount -t tmpfs -o mode=1777 tmpfs "$root/dev/shm"
    mount -t tmpfs -o mode=1777 tmpfs "$root/tmp"
    mount -t tmpfs -o mode=0755 tmpfs "$root/run"
    cd "$root"
    pivot_root . mnt
    umount -l /mnt
    cd /
    exec /usr/bin/env -i HOME=/root LANG=C.UTF-8 TERM=dumb CI=true \
        PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin $pip_cert \
        bash -c "cd /root/work/main && make $target && sh scripts/shared-libs-audit.sh"
' _ "$WORK" "$TARGET" "$PIP_CERT_ENV" || status=$?

if [ "$status" -eq 0 ]; then
    echo "fresh-root-check: PASSED (make $TARGET on a fresh Debian 12 root)"
else
    echo "fresh-root-check: FAILED (make $TARGET exited $status); the root is left in $WORK" >&2
fi
exit "$status"
