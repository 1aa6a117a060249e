#!/usr/bin/env bash
# glslc.sh builds a glslc new enough for ggml's cooperative-matrix shaders and
# prints the folder it is installed in (bin/glslc, include/vulkan).
#
# Why: ggml-vulkan compiles its tensor-core (coopmat, coopmat2) matmul and
# flash-attention shaders only when glslc knows GL_KHR_cooperative_matrix and
# GL_NV_cooperative_matrix2. Debian bookworm's glslc (shaderc 2023.2) does
# not, and trixie's binary glslc needs glibc 2.38 (bookworm has 2.36), so
# this builds trixie's shaderc 2025.2 from Debian's source tarballs, with
# glslang, SPIRV-Tools and SPIRV-Headers as shaderc's third_party sources,
# into one static glslc. The same folder also gets trixie's Vulkan headers
# (1.4.309, bundled in the vulkan-loader source tarball): ggml's C++ code
# uses VK_KHR_cooperative_matrix / VK_NV_cooperative_matrix2, which
# bookworm's headers (1.3.239) lack. Only the headers are taken; programs
# still link bookworm's libvulkan.
#
# Tarballs come from deb.debian.org (trixie, main) and are checked against
# the SHA-256 sums of trixie's Sources index, pinned below. The install folder
# carries a hash of this script, so changing a version, a sum or a build
# option gives a fresh build; a stamp records success, and a second run
# prints the folder in a second.
#
# Usage: glslc.sh [--print-path]
#   prints the folder; glslc is <folder>/bin/glslc, headers <folder>/include
#   --print-path  print the folder without building anything
#   AG_CACHE      cache root (default $HOME/.cache/ag); downloads are kept in
#                 $AG_CACHE/downloads
#   AG_GGML_JOBS  parallel compile jobs (default 2)
# Cold build: 37 min measured on 2 cores shared with other builds (mostly
# SPIRV-Tools' optimizer and glslang).
set -euo pipefail

DEBIAN=http://deb.debian.org/debian
# name | pool folder | SHA-256 (trixie Sources, Checksums-Sha256)
TARBALLS=(
  "shaderc_2025.2.orig.tar.gz|pool/main/s/shaderc|3fddc13bbb87411c6f7b8f447e87c1637933450087e70fc21da650041f4e0132"
  "glslang_15.1.0+1.4.309.0.orig.tar.gz|pool/main/g/glslang|180f17ea51e6b71bf57b9e0fea78ba3ecd76e3ec8e4c91f0771b922eb22bf4b2"
  "spirv-tools_2025.1~rc1.orig.tar.gz|pool/main/s/spirv-tools|6895160d5a842552eda6412440747cbadddd47005957bc43bb03926162686777"
  "spirv-headers_1.6.1+1.4.309.0.orig.tar.gz|pool/main/s/spirv-headers|64ea06bf123c5c063a6be01dd45adec6a30cc0862000781ca18f9104693b722c"
  "vulkan-loader_1.4.309.0.orig.tar.xz|pool/main/v/vulkan-loader|6e37284e5c8ef5f06cef273cc207f0b31cb3b63c1ea2875639e843b01da4e6d7"
)

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
CACHE="${AG_CACHE:-$HOME/.cache/ag}"
JOBS="${AG_GGML_JOBS:-2}"
PREFIX="$CACHE/glslc-2025.2-$(sha256sum "$HERE/glslc.sh" | cut -c1-12)"
STAMP="$PREFIX/.built"

if [[ "${1:-}" == "--print-path" ]]; then
  echo "$PREFIX"
  exit 0
fi
if [[ $# -gt 0 ]]; then
  echo "usage: $0 [--print-path]" >&2
  exit 2
fi

log() { echo "glslc build: $*" >&2; }

if [[ -f "$STAMP" ]]; then
  log "up to date ($(cat "$STAMP"))"
  echo "$PREFIX"
  exit 0
fi

missing=()
need() { command -v "$1" >/dev/null 2>&1 || missing+=("$1 (Debian package $2)"); }
need curl curl
need cmake cmake
need make make
need g++ g++
need gcc gcc
need python3 python3     # shaderc and glslang generate version headers with it
need tar tar
need xz xz-utils
need sha256sum coreutils
if [[ "$(gcc -print-file-name=libc.a)" != /* ]]; then
  missing+=("libc.a for the static link (Debian package libc6-dev)")
fi
if [[ ${#missing[@]} -gt 0 ]]; then
  echo "glslc build: missing tools:" >&2
  printf '  %s\n' "${missing[@]}" >&2
  echo "install them with: apt-get install -y curl cmake make g++ python3 xz-utils" >&2
  exit 1
fi

DL="$CACHE/downloads"
mkdir -p "$DL"
for t in "${TARBALLS[@]}"; do
  IFS='|' read -r name dir sum <<<"$t"
  f="$DL/$name"
  if [[ -f "$f" ]] && echo "$sum  $f" | sha256sum -c --status; then
    continue
  fi
  log "downloading $DEBIAN/$dir/$name"
  # The pool folders are plain HTTP; integrity comes from the pinned sum.
  curl -fsSL --retry 3 -o "$f.part" "$DEBIAN/$dir/$name" || {
    echo "glslc build: download of $DEBIAN/$dir/$name failed" >&2
    exit 1
  }
  if ! echo "$sum  $f.part" | sha256sum -c --status; then
    echo "glslc build: $name: SHA-256 $(sha256sum "$f.part" | cut -d' ' -f1), want $sum" >&2
    rm -f "$f.part"
    exit 1
  fi
  mv "$f.part" "$f"
done

SRC="$PREFIX/src"
BUILD="$PREFIX/build"
rm -rf "$PREFIX"
mkdir -p "$SRC" "$BUILD"
# unpack TARBALL DEST: each tarball has one top folder (its name varies:
# SPIRV-Tools' is KhronosGroup-SPIRV-Tools-<commit>); strip it.
unpack() {
  mkdir -p "$2"
  tar -xf "$DL/$1" -C "$2" --strip-components=1
}
log "unpacking sources into $SRC"
unpack shaderc_2025.2.orig.tar.gz "$SRC/shaderc"
# shaderc's third_party/CMakeLists.txt builds these when present (its DEPS
# would fetch them from GitHub; Debian's versions are the ones trixie's
# glslc is built against).
unpack glslang_15.1.0+1.4.309.0.orig.tar.gz "$SRC/shaderc/third_party/glslang"
unpack spirv-tools_2025.1~rc1.orig.tar.gz "$SRC/shaderc/third_party/spirv-tools"
unpack spirv-headers_1.6.1+1.4.309.0.orig.tar.gz "$SRC/shaderc/third_party/spirv-headers"
unpack vulkan-loader_1.4.309.0.orig.tar.xz "$SRC/vulkan-loader"

# glslc --version prints build-version.inc, which shaderc's build-version
# step derives from `git describe` and the first dated line of CHANGES: from
# a tarball that gives "shaderc v2023.8 unknown hash" (v2025.2 has no date
# yet). As Debian does, write the versions ourselves and point the step's
# output elsewhere.
sed -i 's#^\(  ${shaderc_SOURCE_DIR} .*\)/build-version.inc$#\1/build-version.unused.inc#' "$SRC/shaderc/CMakeLists.txt"
grep -q 'build-version.unused.inc' "$SRC/shaderc/CMakeLists.txt" || {
  echo "glslc build: shaderc's build-version step is not where expected" >&2
  exit 1
}
printf '"%s\\n"\n' "shaderc 2025.2 (Debian trixie sources)" "spirv-tools 2025.1~rc1" "glslang 15.1.0+1.4.309.0" >"$BUILD/build-version.inc"

log "configuring shaderc (Release, static, glslc only)"
# Tests, examples, the copyright check and the glslang/SPIRV-Tools command
# line tools are not needed. SHADERC_SKIP_INSTALL stays off: with it shaderc
# 2025.2 exports glslang's install targets without SPIRV-Tools' and
# configuring fails (nothing is installed anyway). -Werror is off: compilers
# other than upstream CI's warn. -static: glslc needs no shared library at
# all, so it runs wherever this machine's binaries run.
cmake -S "$SRC/shaderc" -B "$BUILD" \
  -DCMAKE_BUILD_TYPE=Release \
  -DBUILD_SHARED_LIBS=OFF \
  -DSHADERC_SKIP_TESTS=ON \
  -DSHADERC_SKIP_EXAMPLES=ON \
  -DSHADERC_SKIP_COPYRIGHT_CHECK=ON \
  -DSHADERC_ENABLE_WERROR_COMPILE=OFF \
  -DSPIRV_SKIP_TESTS=ON \
  -DSPIRV_SKIP_EXECUTABLES=ON \
  -DSPIRV_WERROR=OFF \
  -DENABLE_GLSLANG_BINARIES=OFF \
  -DGLSLANG_TESTS=OFF \
  -DCMAKE_EXE_LINKER_FLAGS=-static \
  >"$BUILD/configure.log" 2>&1 || {
  tail -40 "$BUILD/configure.log" >&2
  exit 1
}

start=$(date +%s)
log "compiling glslc with $JOBS jobs (cold: about 35 min on 2 cores); log in $BUILD/build.log"
cmake --build "$BUILD" --target glslc_exe -j "$JOBS" >"$BUILD/build.log" 2>&1 || {
  tail -40 "$BUILD/build.log" >&2
  exit 1
}

mkdir -p "$PREFIX/bin" "$PREFIX/include"
cp "$BUILD/glslc/glslc" "$PREFIX/bin/glslc"
strip "$PREFIX/bin/glslc" 2>/dev/null || true
cp -r "$SRC/vulkan-loader/vulkan-headers/include/vulkan" "$SRC/vulkan-loader/vulkan-headers/include/vk_video" "$PREFIX/include/"
# A smoke test: the coopmat extensions must compile, or ggml would silently
# build without them again.
for ext in GL_KHR_cooperative_matrix GL_NV_cooperative_matrix2; do
  printf '#version 460\n#extension %s : require\nvoid main() {}\n' "$ext" >"$BUILD/t.comp"
  "$PREFIX/bin/glslc" -fshader-stage=compute --target-env=vulkan1.3 -o /dev/null "$BUILD/t.comp" || {
    echo "glslc build: the new glslc rejects $ext" >&2
    exit 1
  }
done
rm -rf "$BUILD" "$SRC"
echo "$("$PREFIX/bin/glslc" --version | head -3 | paste -sd, | sed 's/,/, /g'), Vulkan-Headers 1.4.309, built $(date -u +%Y-%m-%dT%H:%M:%SZ) in $(($(date +%s) - start)) s" >"$STAMP"
log "done: $(cat "$STAMP")"
echo "$PREFIX"
