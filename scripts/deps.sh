#!/usr/bin/env bash
# Installs, when missing, what `make test` needs on Debian/Ubuntu: Mesa's
# lavapipe (Vulkan on the CPU, for the WebGPU and ggml-Vulkan tests), Chromium
# (browser tests, SwiftShader WebGPU), and the ggml build tools. Needs root;
# without root it only says what is missing.
set -euo pipefail
pkgs=(mesa-vulkan-drivers libvulkan1 libvulkan-dev chromium cmake g++ glslc glslang-tools spirv-headers libgomp1)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && { echo "deps: all present"; exit 0; }
echo "deps: installing ${missing[*]}"
if [ "$(id -u)" != 0 ]; then
  echo "deps: not root; install them with: sudo apt-get install -y --no-install-recommends ${missing[*]}" >&2
  exit 1
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}"
