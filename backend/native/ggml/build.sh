#!/usr/bin/env bash
# build.sh builds ggml (CPU + Vulkan backends) as static libraries for
# ag's backend/native and prints the install prefix (include/ and lib/).
#
# Source: the Go module github.com/ollama/ollama@v0.17.4, which vendors ggml
# (llama.cpp ec98e2002 plus ollama's patches) under ml/backend/ggml/ggml.
# `go mod download` fetches it checksum-verified against sum.golang.org.
# The sources are copied to a writable folder in the cache, patched with
# patches/*.patch (each says why), built with CMake, and a stamp records
# success: a second run with the same version and patches costs seconds.
#
# Usage: build.sh [--print-prefix]
#   AG_CACHE     cache root (default $HOME/.cache/ag)
#   AG_GGML_JOBS parallel compile jobs (default 2)
#   AG_GGML_COOPMAT=1  also compile ggml's cooperative-matrix (tensor-core)
#                matmul and flash-attention shaders: builds a newer glslc and
#                takes newer Vulkan headers with glslc.sh (cold: 13-37 min
#                more, once), applies patches/*.coopmat.patch too, and
#                installs into its own prefix (ggml-ollama-<version>-coopmat-*).
#                Without it nothing changes: bookworm's glslc and headers,
#                which know no coopmat, and the usual prefix.
set -euo pipefail

VERSION=v0.17.4
MODULE=github.com/ollama/ollama
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
CACHE="${AG_CACHE:-$HOME/.cache/ag}"
JOBS="${AG_GGML_JOBS:-2}"

# The folder name carries a hash of the patches and the top-level CMake file
# (with the version and the CMake options below), so changing any of them
# gives a fresh build instead of a stale one.
CMAKE_OPTS=(-DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=OFF -DGGML_VULKAN=ON -DGGML_NATIVE=OFF)
hash_inputs() {
  { echo "$VERSION ${CMAKE_OPTS[*]}"; cat "$HERE/CMakeLists.txt" "${PATCHES[@]}"; } | sha256sum | cut -c1-12
}
COOPMAT="${AG_GGML_COOPMAT:-0}"
if [[ "$COOPMAT" == 1 ]]; then
  # glslc.sh's folder name carries its own hash; patches/*.coopmat.patch
  # apply to this build only (each says why).
  GLSLC_DIR="$(bash "$HERE/glslc.sh" --print-path)"
  PATCHES=("$HERE"/patches/*.patch)
  hash_inputs() {
    { echo "$VERSION ${CMAKE_OPTS[*]} coopmat $(basename "$GLSLC_DIR")"; cat "$HERE/CMakeLists.txt" "${PATCHES[@]}"; } | sha256sum | cut -c1-12
  }
  PREFIX="$CACHE/ggml-ollama-$VERSION-coopmat-$(hash_inputs)"
else
  # The default build: the same inputs (and hash) as before coopmat builds
  # existed; *.coopmat.patch stay out.
  PATCHES=()
  for p in "$HERE"/patches/*.patch; do
    [[ "$p" == *.coopmat.patch ]] || PATCHES+=("$p")
  done
  PREFIX="$CACHE/ggml-ollama-$VERSION-$(hash_inputs)"
fi
STAMP="$PREFIX/.built"

if [[ "${1:-}" == "--print-prefix" ]]; then
  echo "$PREFIX"
  exit 0
fi
if [[ $# -gt 0 ]]; then
  echo "usage: $0 [--print-prefix]" >&2
  exit 2
fi

log() { echo "ggml build: $*" >&2; }

if [[ -f "$STAMP" ]]; then
  log "up to date ($(cat "$STAMP"))"
  echo "$PREFIX"
  exit 0
fi

# Tools first, with the Debian packages that provide them.
missing=()
need() { command -v "$1" >/dev/null 2>&1 || missing+=("$1 (Debian package $2)"); }
need go golang
need cmake cmake
need g++ g++
need gcc gcc
if [[ "$COOPMAT" != 1 ]]; then
  need glslc glslc
fi
need glslangValidator glslang-tools
need patch patch
need sha256sum coreutils
if [[ ! -f /usr/include/vulkan/vulkan.h ]]; then
  missing+=("vulkan/vulkan.h (Debian package libvulkan-dev)")
fi
if [[ ! -d /usr/include/spirv ]] && ! ls /usr/include/spirv* >/dev/null 2>&1; then
  missing+=("SPIR-V headers (Debian package spirv-headers)")
fi
if [[ ${#missing[@]} -gt 0 ]]; then
  echo "ggml build: missing tools:" >&2
  printf '  %s\n' "${missing[@]}" >&2
  echo "install them with: apt-get install -y cmake g++ patch libvulkan-dev glslc glslang-tools spirv-headers" >&2
  exit 1
fi

if [[ "$COOPMAT" == 1 ]]; then
  # Builds glslc on the first run (long), prints its folder in a second later.
  log "coopmat build: glslc and Vulkan headers from glslc.sh"
  GLSLC_DIR="$(bash "$HERE/glslc.sh")"
  # The new glslc compiles the coopmat shaders; the headers (1.4.309) declare
  # VK_KHR_cooperative_matrix / VK_NV_cooperative_matrix2 for ggml-vulkan.cpp
  # and are the only Vulkan include folder of this build; the library linked
  # stays bookworm's libvulkan.
  CMAKE_OPTS+=(-DVulkan_GLSLC_EXECUTABLE="$GLSLC_DIR/bin/glslc" -DVulkan_INCLUDE_DIR="$GLSLC_DIR/include")
fi

log "fetching $MODULE@$VERSION (checksum-verified by go mod download)"
# Run outside any module so that go.mod/go.sum of the caller stay untouched.
json="$(cd / && GOFLAGS= go mod download -json "$MODULE@$VERSION")"
moddir="$(printf '%s\n' "$json" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",\{0,1\}$/\1/p')"
if [[ -z "$moddir" || ! -d "$moddir/ml/backend/ggml/ggml/src" ]]; then
  echo "ggml build: go mod download gave no usable directory:" >&2
  printf '%s\n' "$json" >&2
  exit 1
fi

SRC="$PREFIX/src-tree"
BUILD="$PREFIX/build"
log "copying ggml sources to $SRC"
rm -rf "$PREFIX"
mkdir -p "$SRC" "$BUILD"
for d in include src cmake; do
  cp -r "$moddir/ml/backend/ggml/ggml/$d" "$SRC/"
done
chmod -R u+w "$SRC"   # the module cache is read-only
cp "$HERE/CMakeLists.txt" "$SRC/CMakeLists.txt"

for p in "${PATCHES[@]}"; do
  log "applying $(basename "$p")"
  patch -s -p1 -d "$SRC" --forward <"$p"
done

log "configuring (GGML_VULKAN=ON, static, Release)"
cmake -S "$SRC" -B "$BUILD" "${CMAKE_OPTS[@]}" >"$BUILD/configure.log" 2>&1 || {
  tail -40 "$BUILD/configure.log" >&2
  exit 1
}
grep -E "supported by glslc|Including|Vulkan found" "$BUILD/configure.log" | sed 's/^/ggml build:   /' >&2 || true
if [[ "$COOPMAT" == 1 ]]; then
  # Asked for coopmat: a glslc that turns out not to support it must not
  # give a build that silently lacks it.
  for ext in GL_KHR_cooperative_matrix GL_NV_cooperative_matrix2; do
    if ! grep -q -- "-- $ext supported by glslc" "$BUILD/configure.log"; then
      echo "ggml build: AG_GGML_COOPMAT=1 but CMake reports no $ext support by $GLSLC_DIR/bin/glslc (see $BUILD/configure.log)" >&2
      exit 1
    fi
  done
  grep -E "Found Vulkan" "$BUILD/configure.log" | sed 's/^/ggml build:   /' >&2 || true
  log "coopmat: GL_KHR_cooperative_matrix and GL_NV_cooperative_matrix2 shaders enabled"
fi

start=$(date +%s)
cold="about 5 min"
[[ "$COOPMAT" == 1 ]] && cold="13-17 min, with the coopmat shaders"
log "compiling with $JOBS jobs (cold: $cold on 2 cores); log in $BUILD/build.log"
cmake --build "$BUILD" --target ggml ggml-base ggml-cpu ggml-vulkan -j "$JOBS" >"$BUILD/build.log" 2>&1 || {
  tail -40 "$BUILD/build.log" >&2
  exit 1
}

log "installing include/ and lib/ into $PREFIX"
mkdir -p "$PREFIX/include" "$PREFIX/lib"
cp "$SRC"/include/*.h "$PREFIX/include/"
for lib in ggml ggml-base ggml-cpu ggml-vulkan; do
  a="$(find "$BUILD" -name "lib$lib.a" -print -quit)"
  if [[ -z "$a" ]]; then
    echo "ggml build: lib$lib.a was not built (see $BUILD/build.log)" >&2
    exit 1
  fi
  cp "$a" "$PREFIX/lib/"
done
# Keep the built archives and headers; drop the object files and sources.
rm -rf "$BUILD" "$SRC"
echo "$MODULE@$VERSION built $(date -u +%Y-%m-%dT%H:%M:%SZ) in $(($(date +%s) - start)) s" >"$STAMP"
log "done: $(cat "$STAMP")"
echo "$PREFIX"
