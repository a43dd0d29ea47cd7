#!/usr/bin/env bash
# ARM in CI (issue 39): pdlite on aarch64 under qemu-user emulation, as a new user on a Raspberry Pi / RK3588 board
# would install it: a Debian bookworm arm64 root (debootstrap), Python 3.11 in a fresh venv there, `pip install
# ".[ocr]"` from a fresh copy of this checkout (the native kernels compiled by the arm64 gcc), then
#   - the README's main command, `pdlite ocr examples/images/sample_en.png`, must print the text x86 prints
#     (tests/fixtures/ocr/reference.json's lines for that image);
#   - `pdlite doctor` must report the NEON kernels in use (ISA neon) and the emulated CPU's features (asimd ...),
#     no x86 lines;
#   - a subset of the kernel suite chosen to take seconds natively (emulation is 10-50x slower), the instruction-set
#     tests among them;
#   - the shipped models on the host target, legacy and PIR (`pdlite check --paths host` against their Paddle
#     Inference references), where ../shared/models is there (PDLITE_ARM_MODELS overrides the folder).
# Needs root (debootstrap, chroot, mounts) and the network to Debian's and PyPI's package registries only. Nothing is
# cached between runs. Measured on a loaded 2-vCPU x86 VM (AMD EPYC): 842 s in all (debootstrap 603 s, pip install
# 83 s, OCR 74 s, doctor 2 s, tests 30 s, models 49 s); with PDLITE_ARM_COMPILER=native pip install took 41 min.
# Environment: PDLITE_ARM_ROOT (where the root is made, default a temp dir, removed at the end),
# PDLITE_ARM_MIRROR (Debian mirror), PDLITE_ARM_TESTS (override the pytest selection).
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$(pwd)
t0=$(date +%s)
stage() { echo "== arm64 [$(( $(date +%s) - t0 ))s] $*"; }

mirror=${PDLITE_ARM_MIRROR:-http://deb.debian.org/debian}
root=${PDLITE_ARM_ROOT:-$(mktemp -d /tmp/pdlite-arm64.XXXXXX)}
models=${PDLITE_ARM_MODELS:-$repo/../shared/models}
tests=${PDLITE_ARM_TESTS:-"tests/kernels/test_host_packed_gemm.py tests/kernels/test_host_native_rows.py \
tests/kernels/test_host_native_isa.py tests/tools/test_doctor.py tests/tools/test_native_build.py \
tests/tools/test_cpu_features.py \
tests/kernels/test_host_native.py::test_default_instruction_set_is_the_best_the_cpu_has \
tests/kernels/test_host_native.py::test_every_instruction_set_version_agrees \
tests/kernels/test_host_native.py::test_the_extension_in_use_was_built_from_this_source"}

stage "host packages: qemu-user-static binfmt-support debootstrap"
if ! command -v qemu-aarch64-static >/dev/null || ! command -v debootstrap >/dev/null; then
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -q
    apt-get install -y -q --no-install-recommends qemu-user-static binfmt-support debootstrap
fi
# aarch64 ELF files run through qemu (the F flag: the interpreter is opened now, so it works inside the chroot)
if [ ! -e /proc/sys/fs/binfmt_misc/qemu-aarch64 ]; then
    [ -e /proc/sys/fs/binfmt_misc/register ] || mount -t binfmt_misc binfmt_misc /proc/sys/fs/binfmt_misc
    update-binfmts --enable qemu-aarch64 || true
fi
[ -e /proc/sys/fs/binfmt_misc/qemu-aarch64 ] || { echo "arm64: binfmt_misc has no qemu-aarch64 entry" >&2; exit 1; }

mounted=()
cleanup() {
    for ((i = ${#mounted[@]} - 1; i >= 0; i--)); do umount -l "${mounted[$i]}" 2>/dev/null || true; done
    [ -n "${PDLITE_ARM_ROOT:-}" ] || rm -rf "$root" "$root.debootstrap.log"
}
trap cleanup EXIT

if [ -x "$root/usr/bin/python3" ] && [ -n "${PDLITE_ARM_ROOT:-}" ]; then
    stage "reusing the arm64 root at $root (PDLITE_ARM_ROOT, for development; CI makes a fresh one)"
    rm -rf "$root/src" "$root/venv" "$root/models"
else
stage "debootstrap arm64 bookworm into $root"
debootstrap --arch=arm64 --variant=minbase --include=python3,python3-venv,python3-dev,gcc,libc6-dev,ca-certificates \
    bookworm "$root" "$mirror" >"$root.debootstrap.log" 2>&1 || { tail -40 "$root.debootstrap.log" >&2; exit 1; }
fi
cp /etc/resolv.conf "$root/etc/resolv.conf"
# the host's CA bundle (a proxy's own CA included, where the host trusts one) and pip settings, for pip in the root
ca=${PIP_CERT:-${SSL_CERT_FILE:-/etc/ssl/certs/ca-certificates.crt}}
[ -f "$ca" ] && cp "$ca" "$root/etc/ssl/certs/pdlite-host-ca.crt"
if [ -f /etc/pip.conf ]; then sed "s#^cert *=.*#cert = /etc/ssl/certs/pdlite-host-ca.crt#" /etc/pip.conf >"$root/etc/pip.conf"; fi
for m in proc sys dev; do
    mount --rbind "/$m" "$root/$m"
    mounted+=("$root/$m")
done

stage "a fresh copy of this checkout (tracked and unignored files) into the root"
mkdir -p "$root/src"
git ls-files -z --cached --others --exclude-standard | tar --null -T - -cf - | tar -xf - -C "$root/src"
if [ -d "$models" ]; then
    mkdir -p "$root/models"
    for m in mobilenet_v3_small mobilenet_v3_small_pir mobilenet_v2 resnet18; do
        [ -d "$models/$m" ] && cp -r "$models/$m" "$root/models/"
    done
fi

passenv=()
for v in PIP_INDEX_URL PIP_EXTRA_INDEX_URL PIP_TRUSTED_HOST PIP_DEFAULT_TIMEOUT http_proxy https_proxy no_proxy \
         HTTP_PROXY HTTPS_PROXY NO_PROXY; do
    [ -n "${!v:-}" ] && passenv+=("$v=${!v}")
done
bundle=/etc/ssl/certs/pdlite-host-ca.crt
[ -f "$root$bundle" ] || bundle=/etc/ssl/certs/ca-certificates.crt
# the host's aarch64 cross GCC (x86-64 executables, run natively) inside the arm64 root, at the packages' own paths
# (gcc-cross, /usr/aarch64-linux-gnu: none of them a path of the root's own), the driver in /usr/local/bin, and the
# x86-64 libraries and loader it needs
cross_into_root() {
    local r=$1 pkgs="gcc-12-aarch64-linux-gnu cpp-12-aarch64-linux-gnu binutils-aarch64-linux-gnu \
libc6-dev-arm64-cross libc6-arm64-cross linux-libc-dev-arm64-cross libgcc-12-dev-arm64-cross libgcc-s1-arm64-cross"
    # shellcheck disable=SC2086
    dpkg -L $pkgs | sort -u | while read -r f; do if [ -f "$f" ] || [ -L "$f" ]; then echo "$f"; fi; done \
        | grep -v '^/usr/bin/\|^/usr/share/' | tar -cf - -T - 2>/dev/null | tar -xf - -C "$r"
    mkdir -p "$r/usr/local/bin"
    cp -L /usr/bin/aarch64-linux-gnu-gcc-12 "$r/usr/local/bin/aarch64-linux-gnu-gcc"
    ldd /usr/bin/aarch64-linux-gnu-gcc-12 /usr/lib/gcc-cross/aarch64-linux-gnu/12/{cc1,collect2,lto-wrapper} \
        /usr/aarch64-linux-gnu/bin/{as,ld.bfd} | grep -o '/[^ ]*\.so[^ ]*' | sort -u | while read -r lib; do
        mkdir -p "$r$(dirname "$lib")"
        cp -L "$lib" "$r$lib"
    done
}

inroot() { chroot "$root" /usr/bin/env -i HOME=/root PATH=/venv/bin:/usr/bin:/bin LANG=C.UTF-8 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_CERT=$bundle SSL_CERT_FILE=$bundle REQUESTS_CA_BUNDLE=$bundle \
    "${passenv[@]}" bash -c "set -euo pipefail; cd /src && $1"; }

# The native kernels' C files take GCC 12 minutes each under emulation (the whole build 15-40 min on 2 cores). By default
# the root compiles them with Debian's aarch64 cross GCC 12 (x86-64 binaries, run natively inside the root: the same
# compiler version and code as the root's own gcc-12, for the same target), still through `pip install` and setup.py;
# PDLITE_ARM_COMPILER=native compiles with the root's own, emulated, gcc instead.
build_env="CFLAGS=-g0" compiler="the root's gcc-12, emulated"
if [ "${PDLITE_ARM_COMPILER:-cross}" = cross ]; then
    stage "the aarch64 cross GCC (x86-64) into the root"
    if ! command -v aarch64-linux-gnu-gcc-12 >/dev/null; then
        DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends gcc-12-aarch64-linux-gnu
    fi
    cross_into_root "$root"
    build_env="PATH=/usr/local/bin:\$PATH GCC_EXEC_PREFIX=/usr/lib/gcc-cross/ CFLAGS='-g0 -idirafter /usr/include' \
LDFLAGS=-fno-use-linker-plugin" compiler="Debian's aarch64 cross gcc-12 (x86-64 binaries)"
fi

stage "venv + pip install '.[ocr]' pytest hypothesis setuptools (the native kernels built by $compiler)"
inroot 'uname -m; python3 --version; gcc --version | head -1; python3 -m venv /venv'
inroot "$build_env pip install -q '.[ocr]' pytest hypothesis 'setuptools>=77' 2>&1 | tail -20"
inroot 'ls -l /venv/lib/python3*/site-packages/pdlite/kernels/host/_native*.so'

stage "the README's main command"
inroot 'cd / && pdlite ocr /src/examples/images/sample_en.png' | tee "$root/ocr.txt"
python3 - "$root/ocr.txt" "$repo/tests/fixtures/ocr/reference.json" <<'EOF'
import json, sys
got = [ln for ln in open(sys.argv[1]).read().splitlines() if ln.strip()]
want = [r["text"] for r in json.load(open(sys.argv[2]))["sample_en.png"]]
if got != want:
    sys.exit(f"arm64: pdlite ocr printed {got}, x86 prints {want}")
print("arm64: OCR text equals x86's, line for line")
EOF

stage "pdlite doctor"
inroot 'cd / && pdlite doctor' | tee "$root/doctor.txt"
grep -q "^platform: Linux aarch64" "$root/doctor.txt" || { echo "arm64: doctor's platform is not aarch64" >&2; exit 1; }
grep -q "^native kernels: yes, ISA neon" "$root/doctor.txt" || { echo "arm64: the NEON kernels are not in use" >&2; exit 1; }
grep -E -q "^cpu: .*features: asimd" "$root/doctor.txt" || { echo "arm64: doctor lists no ARM features" >&2; exit 1; }
if grep -E -q "^cpu: .*(flags:|avx|sse)" "$root/doctor.txt"; then echo "arm64: x86 lines on ARM" >&2; exit 1; fi

stage "kernel tests (NEON, and forced baseline where the tests do it): $tests"
inroot "python -m pytest -q -p no:cacheprovider $tests 2>&1 | tail -25"

if [ -d "$root/models" ]; then
    stage "shipped models on the host target, legacy and PIR, against their Paddle Inference references"
    inroot 'pdlite check --paths host /models/*'
else
    stage "no models at $models: model checks left out"
fi
stage "done"
