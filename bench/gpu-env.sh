# shellcheck shell=bash
# Sourced by the bench scripts that run ag on a GPU machine of the device tool. That machine has no
# Vulkan loader, and its NVIDIA Vulkan driver loads only beside the GL dispatch libraries
# (../shared/notes/PLATFORM.md): Debian's .debs of both are downloaded here and unpacked there.

# gpu_debs: the packages, with libgomp1, which ggml's CPU backend links.
gpu_debs="libvulkan1 libgomp1 libglvnd0 libgl1 libglx0 libegl1 libgles2 libopengl0"

# gpu_env_download DIR: downloads $gpu_debs into DIR on this Debian machine, keeping those already there.
gpu_env_download() {
  command -v apt-get >/dev/null || { echo "gpu_env_download: needs Debian's apt-get" >&2; return 1; }
  [ -n "$(ls /var/lib/apt/lists/*Packages 2>/dev/null)" ] || apt-get update -qq || return 1
  mkdir -p "$1" || return 1
  (cd "$1" && for p in $gpu_debs; do ls "${p}"_*.deb >/dev/null 2>&1 || apt-get download -q "$p" || exit 1; done)
}

# gpu_env_install DIR: unpacks DIR's .debs into / on the GPU machine and points the loader at the NVIDIA
# driver's ICD, which it does not find by itself (a VK_DRIVER_FILES already set is kept).
gpu_env_install() {
  ls "$1"/*.deb >/dev/null 2>&1 || { echo "gpu_env_install: no .debs in $1: run the script's prepare here first and carry them" >&2; return 1; }
  (for f in "$1"/*.deb; do dpkg -x "$f" / || exit 1; done) && ldconfig || return 1
  local icd=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
  if [ -f $icd ]; then export VK_DRIVER_FILES=${VK_DRIVER_FILES:-$icd}; fi
  return 0
}
