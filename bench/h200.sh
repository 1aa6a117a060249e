#!/bin/bash
# The GPU run behind bench/results and issue 14's goals: ag (webgpu and
# ggml-vulkan) next to PyTorch CUDA on one NVIDIA GPU, every comparison's two
# sides in the same call, and the ratios printed as a table at the end.
#
# The GPU machine has no Go, no ggml, no network and no Vulkan loader, and
# its NVIDIA Vulkan driver needs the GL dispatch libraries to load. So, here
# (Debian bookworm, as root, from the repository root):
#   bash bench/h200.sh prepare
# downloads Debian's libvulkan1, libgomp1 and the GL dispatch libraries (bench/gpu-env.sh)
# (libglvnd0 libgl1 libglx0 libegl1 libgles2 libopengl0) as .debs, installs ggml's build tools if
# missing (scripts/deps.sh ggml), builds
# ggml if it is not cached (backend/native/ggml/build.sh), and builds ag and
# the native and webgpu tests with -tags ggml, all gzipped into .run/
# (ignored; about 31 MB, the device tool carries at most 64 MiB). Then on the GPU machine,
# carrying .run, from the repository root:
#   bash bench/h200.sh run        (results in $OUT, or /tmp/h200)
# H200_PARTS picks what runs (default: all of them, in this order):
#   steps    the 4x1024 MLP Adam step at batch 64-4096, lazy and captured, and
#            matmul f32 2048 and 4096, on both backends; the same in PyTorch
#            (f32, TF32 off, eager and CUDA graph)
#   later    webgpu's lazy step with the loss waited for 2 steps later
#   big      the 8x4096 step at batch 1024 and 4096, both sides
#   splitk   ggml-vulkan's 4x1024 step with ggml's own K-split threshold
#            (AG_GGML_VK_SPLIT_K_MIN=2048) against patch 0008's 512
#   tests    both backends' conformance suites and TestMatMulSplitK on this GPU
#   profile  ag demo's profiled steps on the best device (h200-profile.json,
#            which the page opens, and a Chrome trace)
# An unknown part is refused before anything runs. H200_REPS (default 30)
# repetitions per 4x1024 measurement, a third of them for the 8x4096 step. A part that fails is reported and the rest go on;
# the exit status is that of the first failure.
set -uo pipefail
cd "$(dirname "$0")/.."
. bench/gpu-env.sh

parts="steps later big splitk tests profile"

prepare() {
  set -e
  gpu_env_download .run
  bash scripts/deps.sh ggml
  bash backend/native/ggml/build.sh
  local p
  p=$(bash backend/native/ggml/build.sh --print-prefix)
  export CGO_CFLAGS="-I$p/include" CGO_LDFLAGS="-L$p/lib"
  go build -tags ggml -trimpath -ldflags="-s -w" -o .run/ag ./cmd/ag
  for t in native webgpu; do
    go test -c -tags ggml -trimpath -ldflags="-s -w" -o .run/$t.test ./backend/$t/
  done
  gzip -9 -f .run/ag .run/native.test .run/webgpu.test
  ls -la .run/*.deb .run/*.gz
  du -sh .run
}

fail=0
# part NAME CMD...: runs one measurement, keeping its output in $O/NAME.log;
# a failure is printed with the log's tail and remembered.
part() {
  local name=$1
  shift
  echo "== $name: $*"
  "$@" >"$O/$name.log" 2>&1
  local rc=$?
  if [ $rc != 0 ]; then
    echo "!! $name failed (exit $rc):"
    tail -5 "$O/$name.log"
    [ $fail = 0 ] && fail=$rc
  fi
  return 0
}

want() { case ",${H200_PARTS:-${parts// /,}}," in *",$1,"*) return 0 ;; esac; return 1; }

# checkArgs refuses what would otherwise measure nothing quietly: a part
# name mistyped, a repetition count that is not a positive number.
checkArgs() {
  local p
  local want=${H200_PARTS:-}
  for p in ${want//,/ }; do
    case " $parts " in *" $p "*) ;; *) echo "h200.sh run: H200_PARTS: \"$p\" is no part; want a comma-separated list of: ${parts// /, }" >&2; exit 2 ;; esac
  done
  case "${H200_REPS:-30}" in '' | *[!0-9]* | 0) echo "h200.sh run: H200_REPS=\"${H200_REPS:-}\": want a whole number >= 1" >&2; exit 2 ;; esac
}

run() {
  checkArgs
  O=${OUT:-/tmp/h200}
  mkdir -p "$O"
  [ -f .run/ag.gz ] || [ -x .run/ag ] || { echo "h200.sh run: no .run/ag: run 'bash bench/h200.sh prepare' first and carry .run" >&2; exit 1; }
  gpu_env_install .run || exit 1
  (cd .run && for f in ag native.test webgpu.test; do [ -f $f.gz ] && gunzip -kf $f.gz; chmod +x $f 2>/dev/null; done)
  local ag=$PWD/.run/ag reps=${H200_REPS:-30} big
  big=$(((reps + 2) / 3))
  nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader | tee "$O/gpu.txt"
  "$ag" devices 2>&1 | grep -v -E 'Warn|XDG' | tee "$O/devices.txt"
  local t0=$SECONDS
  if want steps; then
    part ag-4x1024 "$ag" bench -reps "$reps" -device webgpu,ggml-vulkan -matmul 2048,4096 -batch 64,256,1024,4096 -modes lazy,captured -json "$O/ag-4x1024.json"
    part torch-4x1024 sh -c "python3 bench/torch_mlp.py --device cuda --cuda-graph --matmul 2048,4096 --matmul-dtypes f32 --batch 64,256,1024,4096 --reps $reps > $O/torch-4x1024.json"
  fi
  if want later; then
    part ag-later "$ag" bench -reps "$reps" -device webgpu -matmul '' -batch 64,256,1024,4096 -modes lazy -later 2 -json "$O/ag-later.json"
  fi
  if want big; then
    part ag-8x4096 "$ag" bench -reps "$big" -device webgpu,ggml-vulkan -matmul '' -width 4096 -depth 8 -batch 1024,4096 -modes lazy,captured -json "$O/ag-8x4096.json"
    part torch-8x4096 sh -c "python3 bench/torch_mlp.py --device cuda --cuda-graph --matmul '' --width 4096 --depth 8 --batch 1024,4096 --reps $big > $O/torch-8x4096.json"
  fi
  if want splitk; then
    part ag-splitk2048 env AG_GGML_VK_SPLIT_K_MIN=2048 "$ag" bench -reps "$reps" -device ggml-vulkan -matmul '' -batch 64,256,1024,4096 -modes captured -json "$O/ag-splitk2048.json"
  fi
  echo "== measured in $((SECONDS - t0)) s"
  python3 bench/h200_table.py "$O" | tee "$O/table.txt"
  if want tests; then
    local t
    for t in native webgpu; do
      # a test binary runs in its package's folder (testdata)
      part $t-tests sh -c "cd backend/$t && exec timeout ${H200_TEST_TIMEOUT:-150} ../../.run/$t.test -test.run 'TestConformance|TestMatMulSplitK' -test.count 1 -test.v"
      echo "$t tests on this GPU: $(grep -c -- '--- PASS' "$O/$t-tests.log") passed, $(grep -c -- '--- FAIL' "$O/$t-tests.log") failed"
    done
  fi
  if want profile; then
    part profile "$ag" demo -device auto -steps 30 -profile -profile-json "$O/h200-profile.json" -trace "$O/h200-trace.json"
  fi
  return $fail
}

case "${1:-}" in
prepare) prepare ;;
run)
  run
  exit $?
  ;;
*)
  echo "usage: bash bench/h200.sh prepare|run" >&2
  exit 2
  ;;
esac
