#!/bin/sh
# Lists every shared library that a binary of the venv (wheels such as playwright's Node.js driver,
# PyAV, OpenCV) or Debian's chromium needs and this machine lacks; exits 1 when there is one.
# scripts/fresh-root-check.sh runs it after `make test`, so a library that system-deps.sh forgets
# is named here even when no test happened to load it.
set -eu
cd "$(dirname "$0")/.."
missing=$(
    { find .venv -type f \( -name '*.so' -o -name '*.so.*' -o -perm -u+x \) 2>/dev/null
      [ -x /usr/lib/chromium/chromium ] && echo /usr/lib/chromium/chromium
    } | while read -r f; do
        head -c 4 "$f" 2>/dev/null | grep -q "ELF" || continue
        ldd "$f" 2>/dev/null | grep "not found" | sed "s|^|$f: |"
    done
)
if [ -n "$missing" ]; then
    echo "shared-libs-audit: missing shared libraries:" >&2
    echo "$missing" >&2
    exit 1
fi
echo "shared-libs-audit: every binary of the venv and chromium finds its libraries"
