#!/bin/sh
# Installs the build into a temporary prefix and builds a tiny consumer against it twice:
# with find_package(lazydt) (shared and static) and with pkg-config. Usage: run.sh BUILD SRC CMAKE
set -eu
build=$1 src=$2 cmake=${3:-cmake}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$cmake" --install "$build" --prefix "$tmp/prefix" >/dev/null

"$cmake" -S "$src" -B "$tmp/consumer" -DCMAKE_PREFIX_PATH="$tmp/prefix" >/dev/null
"$cmake" --build "$tmp/consumer" >/dev/null
"$tmp/consumer/consumer_shared"
"$tmp/consumer/consumer_static"

pc=$(find "$tmp/prefix" -name lazydt.pc | head -n 1)
export PKG_CONFIG_PATH="$(dirname "$pc")"
cc -std=c11 $(pkg-config --cflags lazydt) "$src/consumer.c" -o "$tmp/consumer_pc" \
   $(pkg-config --libs lazydt) -Wl,-rpath,"$(pkg-config --variable=libdir lazydt)"
"$tmp/consumer_pc"
echo "install test: find_package and pkg-config consumers ran"
