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
# Usage: build.sh [--print-prefix | --coopmat-probe]
#   --print-prefix   print where the build goes (or went), building nothing
#   --coopmat-probe  list the Vulkan GPUs here and whether each offers
#                    VK_KHR_cooperative_matrix; exit 0 when one does
#   AG_CACHE     cache root (default $HOME/.cache/ag)
#   AG_GGML_JOBS parallel compile jobs (default 2)
#   AG_GGML_COOPMAT  auto (default): also compile ggml's cooperative-matrix
#                (tensor-core) matmul and flash-attention shaders where a
#                Vulkan GPU here offers VK_KHR_cooperative_matrix; 1: always;
#                0: never. A coopmat build takes Debian trixie's glslc and
#                Vulkan 1.4 headers from glslc.sh (seconds, once), applies
#                patches/*.coopmat.patch too, takes 13-17 min more when cold,
#                and installs into its own prefix
#                (ggml-ollama-<version>-coopmat-*). Without it nothing
#                changes: bookworm's glslc and headers, which know no
#                coopmat, and the usual prefix.
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
# coopmat_probe prints "coopmat NAME" or "none NAME" for each Vulkan device
# that is not CPU-type (lavapipe's cooperative matrices, where offered, are
# emulated) and succeeds when one offers VK_KHR_cooperative_matrix. It is
# compiled once into the cache with the system's C compiler and libvulkan;
# it needs no ggml. No compiler, no libvulkan or no Vulkan driver: no
# coopmat.
coopmat_probe() {
  local dir="$CACHE/coopmat-probe" bin
  bin="$dir/probe-$(sha256sum "$HERE/build.sh" | cut -c1-12)"
  if [[ ! -x "$bin" ]]; then
    mkdir -p "$dir"
    cat >"$dir/probe.c" <<'PROBE'
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <vulkan/vulkan.h>

int main(void) {
	VkApplicationInfo app = {.sType = VK_STRUCTURE_TYPE_APPLICATION_INFO, .apiVersion = VK_API_VERSION_1_1};
	VkInstanceCreateInfo ci = {.sType = VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO, .pApplicationInfo = &app};
	VkInstance inst;
	VkResult r = vkCreateInstance(&ci, NULL, &inst);
	if (r != VK_SUCCESS) {
		fprintf(stderr, "coopmat_probe: vkCreateInstance: VkResult %d\n", (int)r);
		return 2;
	}
	uint32_t n = 0;
	vkEnumeratePhysicalDevices(inst, &n, NULL);
	VkPhysicalDevice *devs = calloc(n ? n : 1, sizeof *devs);
	vkEnumeratePhysicalDevices(inst, &n, devs);
	int found = 0;
	for (uint32_t i = 0; i < n; i++) {
		VkPhysicalDeviceProperties p;
		vkGetPhysicalDeviceProperties(devs[i], &p);
		if (p.deviceType == VK_PHYSICAL_DEVICE_TYPE_CPU) {
			continue;
		}
		uint32_t m = 0;
		vkEnumerateDeviceExtensionProperties(devs[i], NULL, &m, NULL);
		VkExtensionProperties *ext = calloc(m ? m : 1, sizeof *ext);
		vkEnumerateDeviceExtensionProperties(devs[i], NULL, &m, ext);
		int has = 0;
		for (uint32_t k = 0; k < m; k++) {
			if (strcmp(ext[k].extensionName, "VK_KHR_cooperative_matrix") == 0) {
				has = 1;
			}
		}
		free(ext);
		printf("%s %s\n", has ? "coopmat" : "none", p.deviceName);
		found |= has;
	}
	free(devs);
	vkDestroyInstance(inst, NULL);
	return found ? 0 : 1;
}
PROBE
    gcc -O1 -o "$bin" "$dir/probe.c" -lvulkan 2>/dev/null || return 2
  fi
  "$bin" 2>/dev/null
}

# AG_GGML_COOPMAT: 1 builds ggml's cooperative-matrix shaders, 0 does not,
# auto (the default) does where a Vulkan GPU here offers
# VK_KHR_cooperative_matrix: a GPU user's `make vulkan` gets the tensor-core
# matmuls, a machine with lavapipe alone (CI) keeps the plain build.
if [[ "${1:-}" == "--coopmat-probe" ]]; then
  rc=0
  coopmat_probe || rc=$?
  case $rc in
  0) ;;
  1) echo "(no Vulkan GPU here offers VK_KHR_cooperative_matrix)" ;;
  *) echo "(no answer: the probe needs gcc, libvulkan-dev and a Vulkan loader)" ;;
  esac
  exit $rc
fi
COOPMAT="${AG_GGML_COOPMAT:-auto}"
case "$COOPMAT" in
auto | 0 | 1) ;;
*)
  echo "ggml build: AG_GGML_COOPMAT=$COOPMAT: want auto, 0 or 1" >&2
  exit 2
  ;;
esac
COOPMAT_WHY="AG_GGML_COOPMAT=$COOPMAT"
if [[ "$COOPMAT" == auto ]]; then
  if devs=$(coopmat_probe); then
    COOPMAT=1
    COOPMAT_WHY="a Vulkan device offers VK_KHR_cooperative_matrix: $(echo "$devs" | sed -n 's/^coopmat //p' | paste -sd, -)"
  else
    COOPMAT=0
    COOPMAT_WHY="no Vulkan GPU here offers VK_KHR_cooperative_matrix (AG_GGML_COOPMAT=1 builds them anyway)"
  fi
fi
if [[ "$COOPMAT" == 1 ]]; then
  # The shaders depend on glslc's and the headers' versions (glslc.sh's
  # stamp, without its date), not on the folder; patches/*.coopmat.patch
  # apply to this build only (each says why).
  GLSLC_DIR="$(bash "$HERE/glslc.sh" --print-path)"
  if [[ ! -f "$GLSLC_DIR/.built" && "${1:-}" != "--print-prefix" ]]; then
    echo "ggml build: coopmat ($COOPMAT_WHY): glslc and Vulkan headers from glslc.sh" >&2
    GLSLC_DIR="$(bash "$HERE/glslc.sh")"
  fi
  GLSLC_ID="$(sed 's/, installed .*//' "$GLSLC_DIR/.built" 2>/dev/null || echo "glslc not installed yet")"
  PATCHES=("$HERE"/patches/*.patch)
  hash_inputs() {
    { echo "$VERSION ${CMAKE_OPTS[*]} coopmat $GLSLC_ID"; cat "$HERE/CMakeLists.txt" "${PATCHES[@]}"; } | sha256sum | cut -c1-12
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
  echo "usage: $0 [--print-prefix | --coopmat-probe]" >&2
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

log "coopmat shaders: $([[ "$COOPMAT" == 1 ]] && echo yes || echo no) ($COOPMAT_WHY)"
if [[ "$COOPMAT" == 1 ]]; then
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
