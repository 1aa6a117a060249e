#!/usr/bin/env bash
# glslc.sh installs a glslc new enough for ggml's cooperative-matrix shaders
# and prints the folder it is installed in (bin/glslc, include/vulkan).
#
# Why: ggml-vulkan compiles its tensor-core (coopmat, coopmat2) matmul and
# flash-attention shaders only when glslc knows GL_KHR_cooperative_matrix and
# GL_NV_cooperative_matrix2. Debian bookworm's glslc (shaderc 2023.2, glslang
# 11) does not; trixie's (shaderc 2025.2, glslang 15.1) does. ggml's C++ code
# also uses VK_KHR_cooperative_matrix / VK_NV_cooperative_matrix2, which
# bookworm's Vulkan headers (1.3.239) lack; trixie's libvulkan-dev has 1.4.309.
#
# How: trixie's binary packages, fetched with apt-get from Debian's archive
# (a private package list of trixie, signature-checked by apt against the
# Debian archive keyring; the system's apt configuration is not touched),
# unpacked with dpkg-deb into a private folder. trixie's glslc needs glibc
# 2.38 and libstdc++ 13 (bookworm has 2.36 and 12), so the package's own
# glibc, libstdc++ and libgcc come along, and bin/glslc is a script that runs
# the binary through that glibc's loader with only that folder's libraries.
# Only the compiler runs on them: the shaders it writes are embedded in ggml,
# and ggml links this machine's libvulkan. Only libvulkan-dev's headers are
# taken. This replaced a build of shaderc from trixie's sources (35 min on 2
# cores); a download and unpack take seconds.
#
# The install folder carries a hash of this script and of the package
# versions apt picked, so a new trixie point release gives a fresh folder; a
# stamp records success, and a second run with the same versions prints the
# folder in a second (without the network once the versions are known: the
# package list is kept in the cache).
#
# Usage: glslc.sh [--print-path]
#   prints the folder; glslc is <folder>/bin/glslc, headers <folder>/include
#   --print-path  print the folder of the last successful install (or where
#                 an install would go) without fetching anything
#   AG_CACHE      cache root (default $HOME/.cache/ag)
set -euo pipefail

SUITE=trixie
PACKAGES=(glslc libshaderc1 libc6 libstdc++6 libgcc-s1 libvulkan-dev)
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
CACHE="${AG_CACHE:-$HOME/.cache/ag}"
APTDIR="$CACHE/apt-$SUITE"
SELF="$(sha256sum "$HERE/glslc.sh" | cut -c1-12)"
LAST="$CACHE/glslc-$SUITE-$SELF.last" # the folder of the last good install

log() { echo "glslc: $*" >&2; }

if [[ "${1:-}" == "--print-path" ]]; then
  if [[ -f "$LAST" ]]; then cat "$LAST"; else echo "$CACHE/glslc-$SUITE-$SELF-unfetched"; fi
  exit 0
fi
if [[ $# -gt 0 ]]; then
  echo "usage: $0 [--print-path]" >&2
  exit 2
fi

missing=()
need() { command -v "$1" >/dev/null 2>&1 || missing+=("$1 (Debian package $2)"); }
need apt-get apt
need dpkg-deb dpkg
need sha256sum coreutils
KEYRING=/usr/share/keyrings/debian-archive-keyring.gpg
if [[ ! -f "$KEYRING" && "$(id -u)" == 0 ]] && command -v apt-get >/dev/null; then
  # Ubuntu lacks Debian's keys by default; apt checks trixie's list with them.
  log "installing debian-archive-keyring (Debian's archive keys)"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends debian-archive-keyring >&2 || true
fi
[[ -f "$KEYRING" ]] || missing+=("$KEYRING (Debian package debian-archive-keyring)")
if [[ ${#missing[@]} -gt 0 ]]; then
  echo "glslc: missing:" >&2
  printf '  %s\n' "${missing[@]}" >&2
  echo "install them with: apt-get install -y apt dpkg coreutils debian-archive-keyring" >&2
  exit 1
fi

# A private apt: trixie's package list in the cache, nothing of the system's
# sources or lists read or written.
mkdir -p "$APTDIR/lists/partial" "$APTDIR/archives/partial"
echo "deb [signed-by=$KEYRING] http://deb.debian.org/debian $SUITE main" >"$APTDIR/sources.list"
APT=(-o Dir::Etc::sourcelist="$APTDIR/sources.list" -o Dir::Etc::sourceparts=- -o Dir::State::Lists="$APTDIR/lists"
  -o Dir::Cache::archives="$APTDIR/archives" -o Dir::Cache="$APTDIR" -o APT::Get::List-Cleanup=0 -o Debug::NoLocking=1 -o APT::Sandbox::User=root)
versions() {
  local p v
  for p in "${PACKAGES[@]}"; do
    v=$(apt-cache "${APT[@]}" show "$p/$SUITE" 2>/dev/null | awk '/^Version:/{print $2; exit}')
    [[ -n "$v" ]] || return 1
    echo "$p=$v"
  done
}
if ! VERS=$(versions); then
  log "fetching $SUITE's package list into $APTDIR"
  apt-get "${APT[@]}" -qq update >&2 || {
    echo "glslc: apt-get update of $SUITE's package list failed (see above)" >&2
    exit 1
  }
  VERS=$(versions) || {
    echo "glslc: $SUITE's package list has no ${PACKAGES[*]}" >&2
    exit 1
  }
fi
PREFIX="$CACHE/glslc-$SUITE-$( (echo "$SELF"; echo "$VERS") | sha256sum | cut -c1-12)"
STAMP="$PREFIX/.built"
if [[ -f "$STAMP" ]]; then
  log "up to date ($(cat "$STAMP"))"
  echo "$PREFIX" >"$LAST"
  echo "$PREFIX"
  exit 0
fi

DEBS="$PREFIX.debs"
rm -rf "$PREFIX" "$DEBS"
mkdir -p "$DEBS" "$PREFIX/bin" "$PREFIX/include" "$PREFIX/root"
log "downloading $(echo $VERS)"
# apt-get download checks each file against the signed package list.
(cd "$DEBS" && apt-get "${APT[@]}" -qq download $VERS) >&2 || {
  echo "glslc: apt-get download failed (see above)" >&2
  exit 1
}
for d in "$DEBS"/*.deb; do
  dpkg-deb -x "$d" "$PREFIX/root"
done
rm -rf "$DEBS"
LIB="$PREFIX/root/usr/lib/x86_64-linux-gnu"
for f in "$LIB/ld-linux-x86-64.so.2" "$PREFIX/root/usr/bin/glslc" "$PREFIX/root/usr/include/vulkan/vulkan.h"; do
  [[ -e "$f" ]] || {
    echo "glslc: $f is not in the unpacked packages" >&2
    exit 1
  }
done
# The loader, not the kernel, starts glslc: it then uses only $LIB's glibc.
cat >"$PREFIX/bin/glslc" <<EOF
#!/bin/sh
# trixie's glslc on trixie's glibc (see backend/native/ggml/glslc.sh)
exec "$LIB/ld-linux-x86-64.so.2" --library-path "$LIB" "$PREFIX/root/usr/bin/glslc" "\$@"
EOF
chmod +x "$PREFIX/bin/glslc"
cp -r "$PREFIX/root/usr/include/vulkan" "$PREFIX/include/"
[[ -d "$PREFIX/root/usr/include/vk_video" ]] && cp -r "$PREFIX/root/usr/include/vk_video" "$PREFIX/include/"
# A smoke test: the coopmat extensions must compile, or ggml would silently
# build without them again.
t="$PREFIX/t.comp"
for ext in GL_KHR_cooperative_matrix GL_NV_cooperative_matrix2; do
  printf '#version 460\n#extension %s : require\nvoid main() {}\n' "$ext" >"$t"
  "$PREFIX/bin/glslc" -fshader-stage=compute --target-env=vulkan1.3 -o /dev/null "$t" || {
    echo "glslc: $SUITE's glslc rejects $ext" >&2
    exit 1
  }
done
rm -f "$t"
echo "$("$PREFIX/bin/glslc" --version | head -3 | paste -sd, | sed 's/,/, /g'), Vulkan headers $(echo "$VERS" | sed -n 's/^libvulkan-dev=//p'), installed $(date -u +%Y-%m-%dT%H:%M:%SZ)" >"$STAMP"
echo "$PREFIX" >"$LAST"
log "done: $(cat "$STAMP")"
echo "$PREFIX"
