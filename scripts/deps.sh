#!/bin/sh
# Installs the Debian packages lazydt builds and tests with; idempotent, quiet when all are there.
set -eu

PKGS="build-essential cmake pkg-config libxxhash-dev libcriterion-dev libopenblas-dev \
libopenmpi-dev openmpi-bin libcjson-dev"

missing=""
for p in $PKGS; do
    if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
        missing="$missing $p"
    fi
done

[ -z "$missing" ] && exit 0

if [ "$(id -u)" -eq 0 ]; then
    echo "deps: installing$missing"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq || echo "deps: apt-get update failed; trying the install with the current lists" >&2
    # shellcheck disable=SC2086
    apt-get install -y -qq --no-install-recommends $missing >/dev/null
else
    echo "deps: missing packages; run as root:" >&2
    echo "  sudo apt-get install -y --no-install-recommends$missing" >&2
    exit 1
fi
