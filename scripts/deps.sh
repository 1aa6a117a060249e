#!/usr/bin/env bash
# Installs, when missing, what `make test` needs on Debian/Ubuntu: Mesa's
# lavapipe (Vulkan on the CPU, for the WebGPU and ggml-Vulkan tests), Chromium
# (browser tests, SwiftShader WebGPU), Node (the CPU backend's tests under
# GOOS=js, make wasm-test), the ggml build tools, and gdb (scripts/crashtrace.sh
# reads a crashed test's core with it). Needs root; without root, or off
# Debian, it says what is missing and fails (the ggml set goes on: build.sh
# checks the tools themselves).
#   scripts/deps.sh          what make test needs
#   scripts/deps.sh peers    what make bench-peers needs: Debian's PyTorch and the
#                            threaded OpenBLAS (without it PyTorch runs on the
#                            reference BLAS, ~10x slower, and the comparison is void)
#   scripts/deps.sh ggml     what building ggml needs (make vulkan, the bench
#                            scripts' prepare): backend/native/ggml/build.sh's tools
set -euo pipefail
ggml=(cmake g++ patch libvulkan-dev glslc glslang-tools spirv-headers)
pkgs=(mesa-vulkan-drivers libvulkan1 chromium nodejs libgomp1 gdb "${ggml[@]}")
# advisory: where nothing can be installed, say so and go on: build.sh
# checks its tools by name (a glslc from the Vulkan SDK counts) and says
# what is missing
advisory=0
case "${1:-}" in
"") ;;
peers) pkgs=(python3-torch libopenblas0-pthread) ;;
ggml) pkgs=("${ggml[@]}") advisory=1 ;;
*) echo "deps: unknown set \"$1\": want none (make test), peers or ggml" >&2; exit 2 ;;
esac
if ! command -v dpkg-query >/dev/null; then
  echo "deps: not Debian/Ubuntu (no dpkg-query); install these or their like yourself: ${pkgs[*]}" >&2
  exit $((1 - advisory))
fi
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && { echo "deps: all present"; exit 0; }
if [ "$(id -u)" != 0 ]; then
  echo "deps: missing ${missing[*]}; not root: install them with: sudo apt-get install -y --no-install-recommends ${missing[*]}" >&2
  exit $((1 - advisory))
fi
echo "deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}"
