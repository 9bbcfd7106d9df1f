#!/bin/sh
# Make a slim, carryable copy of a CUDA build for a GPU machine that cannot install packages
# (no network, another distribution): the executables (stripped), the ctest files, and every
# shared library they load from this machine except the C and C++ runtimes, which any Linux
# host has. cuBLAS and NCCL are not copied (lazydt opens them on first use, docs/gpu.md): on the
# GPU machine set LDT_CUBLAS_LIBRARY / LDT_NCCL_LIBRARY or LD_LIBRARY_PATH to its own.
#   scripts/gpu-bundle.sh BUILD DEST [LABEL]
# With LABEL (e.g. gpu), only the test executables that ctest runs under that label are copied.
# DEST gets BUILD's tree of executables and ctest files, and DEST/lib the libraries. The ctest
# files and the tests name BUILD and this checkout by absolute path, so on the GPU machine the
# checkout must sit at the same path (a symbolic link will do) and DEST be moved to BUILD:
#   mkdir -p "$(dirname /abs/checkout)"; ln -sfn "$PWD" /abs/checkout; mv DEST BUILD
#   LD_LIBRARY_PATH=BUILD/lib LDT_GPU_CHECK_PREBUILT=1 BUILD=BUILD scripts/gpu-check.sh
set -eu
[ $# -eq 2 ] || [ $# -eq 3 ] || { echo "usage: $0 BUILD DEST [LABEL]" >&2; exit 2; }
build=$(cd "$1" && pwd)
dest=$2
label=${3:-}
wanted=""   # with LABEL: the test executables its tests run
if [ -n "$label" ]; then
    wanted=$(ctest --test-dir "$build" -L "$label" --show-only=json-v1 |
             grep -o "\"$build/tests/[^\"]*\"" | tr -d '"' | sort -u)
    [ -n "$wanted" ] || { echo "gpu-bundle: no test under label $label in $build" >&2; exit 1; }
fi
[ -f "$build/CMakeCache.txt" ] || { echo "gpu-bundle: $build is not a CMake build folder" >&2; exit 1; }
grep -q '^LDT_CUDA:[A-Z]*=ON' "$build/CMakeCache.txt" ||
    echo "gpu-bundle: warning: $build was not configured with LDT_CUDA=ON" >&2
rm -rf "$dest"
mkdir -p "$dest/lib"
bins=""
for d in "$build" "$build/tests"; do
    [ -d "$d" ] || continue
    rel=${d#"$build"}
    mkdir -p "$dest$rel"
    [ -f "$d/CTestTestfile.cmake" ] && cp "$d/CTestTestfile.cmake" "$dest$rel/"
    for f in "$d"/*; do
        [ -f "$f" ] && [ -x "$f" ] || continue
        case "$f" in *.sh) cp "$f" "$dest$rel/"; continue ;; esac
        if [ -n "$label" ] && [ "$rel" = /tests ]; then
            printf '%s\n' "$wanted" | grep -qx "$f" || continue
        fi
        cp -P "$f" "$dest$rel/"
        [ -L "$f" ] && continue
        strip --strip-debug "$dest$rel/$(basename "$f")" 2>/dev/null || true
        bins="$bins $f"
    done
done
# the shared library and its links
for f in "$build"/liblazydt.so*; do
    [ -e "$f" ] && cp -P "$f" "$dest/"
done
[ -f "$dest/liblazydt.so.0.1.0" ] && strip --strip-debug "$dest"/liblazydt.so.*.*.* 2>/dev/null || true
# every library the executables load, but the C and C++ runtimes
for f in $bins; do
    ldd "$f" 2>/dev/null | awk '$2 == "=>" && $3 ~ /^\// { print $3 }'
done | sort -u | while read -r lib; do
    case "$(basename "$lib")" in
        libc.so.*|libm.so.*|libdl.so.*|libpthread.so.*|librt.so.*|ld-linux*|libgcc_s.so.*|libstdc++.so.*) ;;
        liblazydt.so*) ;;
        *) cp -L "$lib" "$dest/lib/" ;;
    esac
done
echo "gpu-bundle: $(du -sh "$dest" | cut -f1) in $dest ($(ls "$dest/lib" | wc -l) libraries)"
