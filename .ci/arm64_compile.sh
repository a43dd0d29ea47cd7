#!/usr/bin/env bash
# Compile checks of the native kernels for arm64 targets (issue 39), no emulation needed:
#   - GCC, aarch64 Linux (aarch64-linux-gnu-gcc, the flags setup.py uses, warnings shown, errors fatal),
#     and a check that the NEON tiles (neon.h) were compiled into lane-indexed FMAs;
#   - Clang, aarch64 Linux (--target=aarch64-linux-gnu);
#   - Clang, macOS arm64 / Apple silicon (--target=arm64-apple-macos11), syntax only: there is no macOS SDK here, so
#     the aarch64 Linux C library headers stand in for the SDK's (the kernels use only C99, pthreads and arm_neon.h).
# Python.h: this machine's (x86-64) CPython headers, with its pyconfig.h taken directly (Debian's multiarch wrapper
# would refuse an aarch64 target); the kernels use only the limited, layout-independent parts of the C API.
# Needs: apt-get install gcc-aarch64-linux-gnu clang (the script installs them when missing and it runs as root).
set -euo pipefail
cd "$(dirname "$0")/.."
src=pdlite/kernels/host/native_src
need=()
command -v aarch64-linux-gnu-gcc >/dev/null || need+=(gcc-aarch64-linux-gnu)
command -v clang >/dev/null || need+=(clang)
if [ ${#need[@]} -gt 0 ]; then
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -q && apt-get install -y -q --no-install-recommends "${need[@]}"
fi

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
inc=$(python3 -c 'import sysconfig; print(sysconfig.get_paths()["include"])')
ver=$(python3 -c 'import sys; print(f"{sys.version_info[0]}.{sys.version_info[1]}")')
mkdir -p "$tmp/inc"
cfg=$inc/pyconfig.h
if grep -q "x86_64-linux-gnu" "$cfg" 2>/dev/null; then cfg=/usr/include/x86_64-linux-gnu/python$ver/pyconfig.h; fi
cp "$cfg" "$tmp/inc/pyconfig.h"
pyinc=(-I"$tmp/inc" -I"$inc")
flags=(-O3 -fno-wrapv -ffp-contract=fast -pthread -fPIC -Wall
       -DPD_SOURCE_SHA256='"compile-check"')

echo "== aarch64-linux-gnu-gcc $(aarch64-linux-gnu-gcc -dumpversion)"
for f in "$src"/*.c; do
    aarch64-linux-gnu-gcc -Werror "${flags[@]}" "${pyinc[@]}" -c "$f" -o "$tmp/$(basename "$f" .c).gcc.o"
done
# the NEON tiles are in the packed GEMM's object: lane-indexed FMAs (fmla vD.4s, vN.4s, vM.s[lane])
n=$(aarch64-linux-gnu-objdump -d "$tmp/packed_gemm.gcc.o" | grep -c -E 'fmla\s+v[0-9]+\.4s, v[0-9]+\.4s, v[0-9]+\.s\[' || true)
echo "packed_gemm.o: $n lane-indexed NEON FMAs"
[ "$n" -ge 28 ] || { echo "arm64_compile: the NEON tiles were not compiled in" >&2; exit 1; }
# the portable kernels are vectorised with NEON too (4-float vector FMAs / max / adds in their loops)
for f in depthwise pool activation norm_softmax winograd; do
    v=$(aarch64-linux-gnu-objdump -d "$tmp/$f.gcc.o" | grep -c -E '\s(fmla|fmax|fadd|fmul|fmin)\s+v[0-9]+\.4s' || true)
    echo "$f.o: $v NEON vector instructions"
    [ "$v" -gt 0 ] || { echo "arm64_compile: $f.c was not vectorised for NEON" >&2; exit 1; }
done

echo "== $(clang --version | head -1), --target=aarch64-linux-gnu"
for f in "$src"/*.c; do
    clang --target=aarch64-linux-gnu "${flags[@]}" "${pyinc[@]}" -c "$f" -o "$tmp/$(basename "$f" .c).clang.o"
done

echo "== clang --target=arm64-apple-macos11 (syntax; Linux aarch64 libc headers in place of the macOS SDK's)"
libc=/usr/aarch64-linux-gnu/include
for f in "$src"/*.c; do
    # ('__nonnull' is a nullability keyword on Apple targets; glibc's headers use it as a macro of their own)
    clang --target=arm64-apple-macos11 -fsyntax-only -Wall -ffp-contract=fast '-D__nonnull(p)=' -Wno-macro-redefined \
        -DPD_SOURCE_SHA256='"compile-check"' -isystem "$libc" "${pyinc[@]}" "$f"
done
echo "arm64 compile checks passed"
