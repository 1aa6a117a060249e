#!/bin/bash
# The browser on a real GPU: headless Chromium with WebGPU on the H200 (Dawn
# over the NVIDIA Vulkan driver), `make bench-browser`'s MLP step next to
# tfjs-webgpu, and the same step natively (ag bench -device webgpu) in the
# same call. The GPU machine has no network, no Go, no npm and no Chromium;
# Chromium and its libraries (about 120 MB compressed) exceed one call's
# 64 MiB working tree, so they travel in parts over consecutive calls (a
# machine stays warm 30 s after a call and keeps what earlier calls left
# outside the repository).
#
# Here, from the repository root (as root, Debian bookworm; .chr/ is
# ignored through .git/info/exclude):
#   bash bench/h200-browser.sh prepare
# It downloads chromium and every library it loads (apt-get download, no
# install), unpacks them into one tree, drops what a headless run does not
# need (docs, locales but en-US, the Vulkan validation layer), packs it as
# .chr/p00 p01 p02 (41 MB each), packs the harness (bench/browser/pack.sh)
# into .chr/agbrow and a native ag into .chr/agnat.gz, and writes the
# launcher .chr/run-chr.sh. Then, in consecutive device calls:
#   1. carry .chr/p00:  mkdir -p /root/chr && cp .chr/p00 /root/chr/
#   2. carry .chr/p01:  cp .chr/p01 /root/chr/
#   3. carry .chr/p02 .chr/extra.tar.xz .chr/agbrow .chr/run-chr.sh .chr/agnat.gz and .run
#      (Debian's libvulkan1 and GL dispatch .debs, see bench/h200.sh):
#      bash bench/h200-browser.sh run     (sizes: BR_SIZES; BR_EVERY, BR_STEPS,
#      BR_STREAM, BR_TFJS: see run below)
# or, for the WebGPU tests in that browser on the GPU (TestInBrowser with
# AG_BROWSERTEST_GPU=1: the conformance suite, the package's tests and the
# f16 matmul tiles, which need a GPU's shader-f16), carry .chr/browsertest.gz
# and .chr/btwasm.tar.xz instead of agbrow and agnat.gz:
#      bash bench/h200-browser.sh tests
# (`bash bench/h200-browser.sh testbins` rebuilds just those two.)
set -euo pipefail

prepare() {
  mkdir -p .chr
  local root=/tmp/ag-chr-root debs=/tmp/ag-chr-debs
  rm -rf "$root" "$debs" && mkdir -p "$root" "$debs"
  command -v chromium >/dev/null || apt-get install -y --no-install-recommends chromium
  # chromium, chromium-common and the package of every library the binary
  # loads, found by file name (dpkg -S by path misses merged-/usr paths);
  # the C and C++ runtimes are the GPU machine's own (Ubuntu 24.04, newer).
  local pkgs="chromium chromium-common" so p
  for so in $(ldd /usr/lib/chromium/chromium | awk '/=>/{print $1}'); do
    p=$(dpkg -S "*/$so" 2>/dev/null | head -1 | cut -d: -f1) || true
    case "$p" in "" | libc6 | libstdc++6 | libgcc-s1) ;; *) pkgs="$pkgs $p" ;; esac
  done
  (cd "$debs" && apt-get download $(echo "$pkgs" | tr ' ' '\n' | sort -u))
  for f in "$debs"/*.deb; do dpkg-deb -x "$f" "$root"; done
  rm -rf "$root"/usr/share/{doc,man,locale,lintian} "$root"/usr/lib/chromium/libVkLayer_khronos_validation.so* \
    "$root"/usr/lib/chromium/libVkICD_mock_icd.so*
  find "$root"/usr/lib/chromium/locales -name '*.pak' ! -name 'en-US*' -delete
  rm -f .chr/p0*
  tar -C "$root" -cf - . | xz -6 -T2 | split -b 41M -d - .chr/p
  cat >.chr/run-chr.sh <<'EOF'
#!/bin/sh
# Debian bookworm's chromium unpacked in /opt/chr, its libraries beside it
R=/opt/chr
export LD_LIBRARY_PATH=$R/usr/lib/chromium:$R/usr/lib/x86_64-linux-gnu:$R/usr/lib/x86_64-linux-gnu/pulseaudio:$R/lib/x86_64-linux-gnu
export VK_ICD_FILENAMES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
export VK_DRIVER_FILES=$VK_ICD_FILENAMES
exec $R/usr/lib/chromium/chromium "$@"
EOF
  chmod +x .chr/run-chr.sh
  extras "$root"
  rm -rf .chr/agbrow && bash bench/browser/pack.sh .chr/agbrow
  go build -ldflags="-s -w" -o .chr/agnat ./cmd/ag && gzip -f -9 .chr/agnat
  testbins
  ls -la .chr
}

# testbins builds the browser tests for a machine without Go: the harness
# (.chr/browsertest.gz) and its wasm binaries with wasm_exec.js
# (.chr/btwasm.tar.xz).
testbins() {
  rm -rf .chr/btwasm && mkdir -p .chr
  AG_BROWSERTEST_WASM=$PWD/.chr/btwasm go test -count=1 -run '^TestBuildWasm$' ./backend/webgpu/browsertest
  tar -C .chr -cJf .chr/btwasm.tar.xz btwasm && rm -rf .chr/btwasm
  go test -c -o .chr/browsertest ./backend/webgpu/browsertest && gzip -f -9 .chr/browsertest
}

# extras packs .chr/extra.tar.xz: the libraries chromium loads that the
# unpacked packages in ROOT (prepare's tree; none given: every one) lack -
# those under /lib (merged /usr: dpkg -S by name misses them, and the GPU
# machine lacks libdbus-1, libexpat and others) - but the C and C++
# runtimes, which are the GPU machine's own.
extras() {
  local root=${1:-} x=/tmp/ag-chr-extra so b
  rm -rf "$x" && mkdir -p "$x/lib/x86_64-linux-gnu"
  for so in $(ldd /usr/lib/chromium/chromium | awk '/=> \//{print $3}'); do
    b=$(basename "$so")
    case "$b" in libc.so* | libm.so* | libpthread* | libdl.so* | librt.so* | libstdc++* | libgcc_s*) continue ;; esac
    if [ -n "$root" ] && [ -n "$(find "$root" -name "$b" -print -quit)" ]; then continue; fi
    cp -L "$so" "$x/lib/x86_64-linux-gnu/$b"
  done
  tar -C "$x" -cJf .chr/extra.tar.xz .
}

# unpack puts chromium (the three parts) and its extra libraries into
# /opt/chr with the launcher /opt/chr/run.sh, and the Vulkan loader and GL
# dispatch libraries (.run's .debs) into /.
# A warm machine that unpacked them already keeps them: a second run in
# the same call (another BR_EVERY) starts at once.
unpack() {
  if [ ! -x /opt/chr/run.sh ]; then
    mkdir -p /opt/chr
    cp .chr/p02 /root/chr/
    cat /root/chr/p0* | xz -dc | tar -C /opt/chr -xf -
    tar -C /opt/chr -xJf .chr/extra.tar.xz
    cp .chr/run-chr.sh /opt/chr/run.sh
  fi
  (cd .run && for f in *.deb; do dpkg -x "$f" /; done) && ldconfig
  export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
}

tests() {
  unpack
  local out=${OUT:-/tmp} d=/root/bt
  rm -rf $d && mkdir -p $d && tar -C $d -xJf .chr/btwasm.tar.xz && gunzip -c .chr/browsertest.gz >$d/browsertest && chmod +x $d/browsertest
  AG_CHROMIUM=/opt/chr/run.sh AG_BROWSERTEST_GPU=1 AG_BROWSERTEST_WASM=$d/btwasm AG_BROWSERTEST_LOG="$out/bt-" \
    $d/browsertest -test.run "${BT_RUN:-^TestInBrowser$}" -test.v -test.timeout "${BT_TIMEOUT:-9m}" 2>&1 | tee "$out/browsertest.txt"
}

# run: the probe, then for each size WIDTHxDEPTHxBATCH of $BR_SIZES the
# native step (ag bench -device webgpu), the page's step (ag webgpu captured
# and lazy, each timed in the page around ag.train; tfjs-webgpu next to it
# up to width 1024) and the native step again, one JSON per size. The loss
# is read back every $BR_EVERY steps (default 1: each step) on every side.
run() {
  unpack
  rm -rf /root/agbrow && cp -r .chr/agbrow /root/agbrow
  gunzip -c .chr/agnat.gz >/root/agnat && chmod +x /root/agnat
  # BR_EVERY: the loss read every this many steps on every side; BR_STEPS:
  # the page's timed steps (30 reads' worth by default); BR_STREAM: "" the
  # page timed per ag.train call of BR_EVERY steps, 1 as one call of all
  # steps (browserbench -stream: its reads waited for groups later), both;
  # BR_TFJS: tfjs's backend up to width 1024 ("" none).
  local out=${OUT:-/tmp} s w d b tf ev=${BR_EVERY:-1} st=${BR_STREAM:-} tfo=${BR_TFJS-webgpu}
  local steps=${BR_STEPS:-$((30 * ${BR_EVERY:-1}))}
  (cd /root/agbrow && ./run.sh -probe -gpu -chromium /opt/chr/run.sh -json "$out/browser-probe.json")
  page() { # page FLAG SUFFIX
    (cd /root/agbrow && timeout "${BR_TIMEOUT:-240}" ./run.sh -gpu -rounds 1 -width "$w" -depth "$d" -batch "$b" -steps "$steps" -every "$ev" $1 \
      -ag-devices webgpu -tfjs-backends "$tf" -chromium /opt/chr/run.sh -json "$out/browser-$s-e$ev$2.json" | grep -E "^1 |median|ratio") || echo "browser $s $1: rc=$?"
  }
  for s in ${BR_SIZES:-256x4x64 1024x4x256 1024x4x1024 4096x8x1024}; do
    IFS=x read -r w d b <<<"$s"
    tf=$tfo
    [ "$w" -le 1024 ] || tf=
    echo "== $s, the loss read every $ev"
    /root/agnat bench -device webgpu -matmul '' -width "$w" -depth "$d" -batch "$b" -modes lazy,captured -reps 30 -every "$ev" -json "$out/native-$s-e$ev-a.json" 2>&1 | grep -v measuring
    case "$st" in
    "") page "" "" ;;
    1) page -stream -stream ;;
    both) page "" "" && page -stream -stream ;;
    *) echo "BR_STREAM=$st: want empty, 1 or both" >&2 && return 2 ;;
    esac
    /root/agnat bench -device webgpu -matmul '' -width "$w" -depth "$d" -batch "$b" -modes lazy,captured -reps 30 -every "$ev" -json "$out/native-$s-e$ev-b.json" 2>&1 | grep -v measuring
  done
}

case "${1:-}" in
prepare) prepare ;;
extras) extras "${2:-}" ;;
run) run ;;
tests) tests ;;
testbins) testbins ;;
*) echo "usage: $0 prepare|extras|testbins|run|tests (see the comment at the top)" >&2; exit 2 ;;
esac
