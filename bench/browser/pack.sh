#!/usr/bin/env bash
# Packs everything `go run ./bench/browser` needs on a machine without Go,
# npm or network into one folder:
#   OUTDIR/browserbench     the harness (CGO_ENABLED=0: no libc needed)
#   OUTDIR/webdist/         ag.wasm, wasm_exec.js (web/build.sh), ag-rev.txt
#   OUTDIR/node_modules/    only the tfjs files the pages load, paths kept
#   OUTDIR/run.sh           ./browserbench with -wasm, -node-modules, -no-install
# Usage (from anywhere in the checkout): bash bench/browser/pack.sh OUTDIR
# Then on the other machine: OUTDIR/run.sh -probe -gpu -chromium WRAPPER
# (see bench/browser/README.md). GOOS/GOARCH pick another target.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
out=${1:?usage: bash bench/browser/pack.sh OUTDIR}
mkdir -p "$out"
out=$(cd "$out" && pwd)

# The files static/tfjs.html and tfjs.js load (serve.go's tfjsFiles).
files=(
  @tensorflow/tfjs/dist/tf.min.js
  @tensorflow/tfjs-backend-webgpu/dist/tf-backend-webgpu.min.js
  @tensorflow/tfjs-backend-wasm/dist/tf-backend-wasm.min.js
  @tensorflow/tfjs-backend-wasm/dist/tfjs-backend-wasm.wasm
  @tensorflow/tfjs-backend-wasm/dist/tfjs-backend-wasm-simd.wasm
  @tensorflow/tfjs-backend-wasm/dist/tfjs-backend-wasm-threaded-simd.wasm
)
nm=$here/node_modules
if [ ! -f "$nm/${files[0]}" ]; then
  echo "pack.sh: installing the pinned tfjs packages (npm ci in $here)"
  (cd "$here" && npm ci --no-audit --no-fund)
fi
rm -rf "$out/node_modules" "$out/webdist"
for f in "${files[@]}"; do
  mkdir -p "$out/node_modules/$(dirname "$f")"
  cp "$nm/$f" "$out/node_modules/$f"
done
for p in tfjs tfjs-backend-webgpu tfjs-backend-wasm; do # versions and licences travel along
  for f in package.json LICENSE; do
    if [ -f "$nm/@tensorflow/$p/$f" ]; then cp "$nm/@tensorflow/$p/$f" "$out/node_modules/@tensorflow/$p/$f"; fi
  done
done

cd "$root"
bash web/build.sh "$out/webdist"
rev=$(git rev-parse --short=12 HEAD 2>/dev/null || echo unknown)
if [ -n "$(git status --porcelain --untracked-files=no 2>/dev/null)" ]; then rev="$rev+dirty"; fi
echo "$rev" >"$out/webdist/ag-rev.txt"
CGO_ENABLED=0 go build -trimpath -ldflags="-s -w" -o "$out/browserbench" ./bench/browser

cat >"$out/run.sh" <<'RUN'
#!/bin/sh
# ./browserbench on this packed folder: the prebuilt web dist and tfjs files.
# Any flag of browserbench follows, e.g. -probe -gpu -chromium /opt/chr/run.sh
d=$(cd "$(dirname "$0")" && pwd)
exec "$d/browserbench" -wasm "$d/webdist" -node-modules "$d/node_modules" -no-install "$@"
RUN
chmod +x "$out/run.sh" "$out/browserbench"

echo "packed $out (ag $rev):"
(cd "$out" && find . -type f | sort | xargs du -h)
echo "total: $(du -sh "$out" | cut -f1)"
