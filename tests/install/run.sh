#!/bin/sh
# Installs the build into a temporary prefix and builds tiny consumers against it: with
# find_package(lazydt) (shared and static), and with pkg-config (shared, and static from
# `pkg-config --static`). consumer_backends calls ldt_mpi_world, ldt_nccl_world and
# ldt_cuda_device_count, so its static links need MPI, NCCL and CUDA (each when built in) from
# the package; it runs paths that start no MPI and need no GPU.
# Usage: run.sh BUILD SRC CMAKE
set -eu
build=$1 src=$2 cmake=${3:-cmake}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$cmake" --install "$build" --prefix "$tmp/prefix" >/dev/null

"$cmake" -S "$src" -B "$tmp/consumer" -DCMAKE_PREFIX_PATH="$tmp/prefix" >/dev/null
"$cmake" --build "$tmp/consumer" >/dev/null
"$tmp/consumer/consumer_shared"
"$tmp/consumer/consumer_static"
"$tmp/consumer/consumer_backends_static"

pc=$(find "$tmp/prefix" -name lazydt.pc | head -n 1)
export PKG_CONFIG_PATH="$(dirname "$pc")"
cc -std=c11 $(pkg-config --cflags lazydt) "$src/consumer.c" -o "$tmp/consumer_pc" \
   $(pkg-config --libs lazydt) -Wl,-rpath,"$(pkg-config --variable=libdir lazydt)"
"$tmp/consumer_pc"

# Static: liblazydt.a rather than the .so beside it, and only what the .pc lists after it.
static_libs=$(pkg-config --static --libs lazydt | sed 's/-llazydt\( \|$\)/-l:liblazydt.a\1/')
for prog in consumer consumer_backends; do
    cc -std=c11 $(pkg-config --cflags lazydt) "$src/$prog.c" -o "$tmp/${prog}_pc_static" $static_libs
    if readelf -d "$tmp/${prog}_pc_static" | grep -q 'liblazydt\.so'; then
        echo "install test: ${prog}_pc_static links liblazydt.so, not liblazydt.a" >&2
        exit 1
    fi
    "$tmp/${prog}_pc_static"
done
echo "install test: find_package and pkg-config consumers (shared and static) ran"
