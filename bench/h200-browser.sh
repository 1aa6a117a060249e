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
#      (Debian's libvulkan1 and GL dispatch .debs, see bench/gpu-env.sh):
#      bash bench/h200-browser.sh run     (sizes: BR_SIZES; BR_EVERY, BR_STEPS,
#      BR_STREAM, BR_TFJS: see run below)
# or, for the WebGPU tests in that browser on the GPU (TestInBrowser with
# AG_BROWSERTEST_GPU=1: the conformance suite, the package's tests and the
# f16 matmul tiles, which need a GPU's shader-f16), carry .chr/browsertest.gz
# and .chr/btwasm.tar.xz instead of agbrow and agnat.gz:
#      bash bench/h200-browser.sh tests
# (`bash bench/h200-browser.sh testbins` rebuilds just those two.)
#
# GPT-2 in the page beside native and PyTorch (issue 41): here
#   bash bench/h200-browser.sh prepare-gpt2
# packs .chr/gpt2.tar.xz (about 10 MB): the harness (browserbench -gpt2),
# examples/gpt2 as gpt2.wasm with wasm_exec.js and natively, and the
# training text (GOROOT/src's Go files, 4 MB). On the GPU machine, after
# the Chromium parts p00 and p01 (calls 1 and 2 above), one call carrying
# .chr/p02 .chr/extra.tar.xz .chr/run-chr.sh .chr/gpt2.tar.xz and .run:
#   bash bench/h200-browser.sh gpt2
# trains GPT-2 (G2_SIZE, default 124M, at G2_CTX 1024, G2_BATCH 4 or the
# largest batch the page fits) in the page on WebGPU, G2_STEPS (10) steps
# timed after the warm-up; then natively on webgpu with the page's batch
# for G2_NATIVE_STEPS (300) steps, the same 10 timed after 5; prints both
# step times, their ratio (goal <= 1.3) and the step at which the native
# smoothed loss fell below the text's unigram entropy; then PyTorch's step
# of the same model (bench/torch_gpt.py --gpt2; G2_TORCH= skips it).
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/gpu-env.sh

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
  gpu_env_install .run || exit 1
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

# prepare_gpt2 packs .chr/gpt2.tar.xz for `gpt2` (see the top).
prepare_gpt2() {
  local d=/tmp/ag-gpt2-pack rev
  rm -rf "$d" && mkdir -p "$d/webdist" .chr
  GOOS=js GOARCH=wasm go build -trimpath -o "$d/webdist/gpt2.wasm" ./examples/gpt2
  cp "$(go env GOROOT)/lib/wasm/wasm_exec.js" "$d/webdist/"
  rev=$(git rev-parse --short=12 HEAD)
  if [ -n "$(git status --porcelain --untracked-files=no)" ]; then rev="$rev+dirty"; fi
  echo "$rev" >"$d/webdist/ag-rev.txt"
  CGO_ENABLED=0 go build -trimpath -ldflags="-s -w" -o "$d/browserbench" ./bench/browser
  go build -trimpath -ldflags="-s -w" -o "$d/gpt2" ./examples/gpt2
  # the text: GOROOT/src's Go files (tests and testdata left out), in a
  # fixed order, cut at G2_TEXT_BYTES
  find "$(go env GOROOT)/src" -name '*.go' ! -name '*_test.go' ! -path '*/testdata/*' | LC_ALL=C sort | xargs cat 2>/dev/null |
    head -c "${G2_TEXT_BYTES:-4000000}" >"$d/text.txt" 2>/dev/null || true
  tar -C "$d" -cf - . | xz -6 -T2 >.chr/gpt2.tar.xz
  ls -la .chr/gpt2.tar.xz && du -sh "$d"/*
}

# gpt2 runs issue 41's measurement (see the top); G2_OUT_JSON names the
# report (default $OUT/gpt2.json).
gpt2() {
  # G2_LOCAL=1 tries it here: Chromium from PATH with SwiftShader (no -gpu),
  # nothing unpacked, PyTorch on the CPU ($PYTHON: Debian's /usr/bin/python3)
  local chr=/opt/chr/run.sh gpu=-gpu tdev="--device cuda --cuda-graph" py=${PYTHON:-python3}
  if [ -n "${G2_LOCAL:-}" ]; then chr=$(command -v chromium) gpu= tdev="--device cpu"; else unpack; fi
  local out=${OUT:-/tmp} g=${G2_DIR:-/root/g2}
  rm -rf "$g" && mkdir -p "$g" && tar -C "$g" -xJf .chr/gpt2.tar.xz
  local size=${G2_SIZE:-124M} ctx=${G2_CTX:-1024} batch=${G2_BATCH:-4} vocab=${G2_VOCAB:-50257} rc=0
  local json=${G2_OUT_JSON:-$out/gpt2.json}
  (cd "$g" && timeout "${G2_TIMEOUT:-480}" ./browserbench -gpt2 "$size" -ctx "$ctx" -batch "$batch" -vocab "$vocab" -steps "${G2_STEPS:-10}" \
    -native-steps "${G2_NATIVE_STEPS:-300}" -text "$g/text.txt" -wasm "$g/webdist" -native "$g/gpt2" \
    $gpu -chromium "$chr" -chrome-log "$out/gpt2-chrome.log" -json "$json" ${G2_ARGS:-}) || rc=$?
  echo "browserbench -gpt2: rc=$rc"
  if [ -n "${G2_TORCH-1}" ]; then
    # the batch the page trained at (the native run's too)
    batch=$("$py" -c "import json,sys; p=json.load(open(sys.argv[1])).get('page') or {}; print(p.get('batch') or $batch)" "$json" 2>/dev/null || echo "$batch")
    local gpt
    gpt=$("$py" -c "print({'tiny':'2x64','mini':'4x256','124M':'12x768','355M':'24x1024','774M':'36x1280','1558M':'48x1600'}['$size'])")
    echo "pytorch: python3 bench/torch_gpt.py --gpt2 --vocab $vocab --gpt $gpt --ctx $ctx --batch $batch $tdev --reps 10"
    if (cd bench && "$py" torch_gpt.py --gpt2 --vocab "$vocab" --gpt "$gpt" --ctx "$ctx" --batch "$batch" $tdev --reps 10 >"$out/gpt2-torch.json"); then
      "$py" -c "import json,sys; j=json.load(open(sys.argv[1])); [print('pytorch %s %s on %s: %s, %d parameters, batch %d, ctx %d: median %.2f ms/step, min %.2f' % (j['version'], r['kind'], j['device'], r['mode'], r['params'], r['batch'], r['context'], r['median_ms'], r['min_ms'])) for r in j['results']]" "$out/gpt2-torch.json"
    else
      echo "torch_gpt.py: rc=$?"
    fi
  fi
  return $rc
}

case "${1:-}" in
prepare) prepare ;;
prepare-gpt2) prepare_gpt2 ;;
gpt2) gpt2 ;;
extras) extras "${2:-}" ;;
run) run ;;
tests) tests ;;
testbins) testbins ;;
*) echo "usage: $0 prepare|extras|testbins|run|tests|prepare-gpt2|gpt2 (see the comment at the top)" >&2; exit 2 ;;
esac
