#!/usr/bin/env bash
# Builds the browser side of ag: the page's default model, examples/mlp (an
# app.Spec, run by package app's browser runner as every `ag serve -app`
# model is), compiled with GOOS=js GOARCH=wasm to <dir>/ag.wasm, plus Go's
# wasm_exec.js (it must match the Go that built ag.wasm): what web.BuildApp
# does for `ag serve -app`. Default <dir> is web/dist, which `ag serve`
# embeds.
#   bash web/build.sh [dir]
set -euo pipefail
cd "$(dirname "$0")/.."
GO=${GO:-go}
out=${1:-web/dist}
mkdir -p "$out"
GOOS=js GOARCH=wasm "$GO" build -trimpath -o "$out/ag.wasm" ./examples/mlp/
cp "$("$GO" env GOROOT)/lib/wasm/wasm_exec.js" "$out/wasm_exec.js"
echo "built $out/ag.wasm ($(du -h "$out/ag.wasm" | cut -f1)) and $out/wasm_exec.js"
