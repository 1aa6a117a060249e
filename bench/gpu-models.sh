#!/bin/bash
# Issue 40's model rows on one NVIDIA GPU in one device call: where each model step's time goes on both backends,
# beside PyTorch's CUDA graph. ggml is linked with its tensor-core (cooperative-matrix) shaders, as `make vulkan`
# builds it on a GPU machine. Here (Debian bookworm, as root, from the repository root):
#   bash bench/gpu-models.sh prepare
# installs ggml's build tools if missing (scripts/deps.sh ggml), builds that ggml if it is not cached (AG_GGML_COOPMAT=1:
# 7-17 min cold on 2 cores, then cached outside the clone), builds
# ag against it, and packs it with Debian's Vulkan loader and GL dispatch .debs (bench/gpu-env.sh says why) into
# .run/models/ (ignored; about 11 MB). Then, carrying .run/models, on the GPU machine from the repository root:
#   bash bench/gpu-models.sh run          (results in $OUT, or /tmp/gpu-models)
# MODELS_PARTS picks what runs (default: all, in this order; each part's output also goes to $OUT/PART.txt):
#   gpt16    GPT 12x768 (ctx 512, batch 8, dropout 0) at f16 precision on ggml-vulkan, PyTorch autocast f16 beside,
#            and the step per ggml op (GGML_VK_PERF_LOGGER, summed by bench/ggml_perop.py)
#   gpt32    the same GPT in f32 on webgpu and ggml-vulkan per op (ag bench -profiled -ops), PyTorch f32 beside
#   convnet  the convnet at batch 64 and 256 on both backends, PyTorch beside, and ggml-vulkan's step per op
#   small    the transformer 4x256 (ctx 128, batch 32, dropout 0.1) on both backends, PyTorch beside, and
#            ggml-vulkan's step per op
#   vkmatmul ggml-vulkan's f32 products on ggml's mul_mat (AG_GGML_MATMUL=ggml), on the faster of it and ag's
#            kernel (patch 0019) timed per shape (tune, the default) and on ag's kernel wherever it takes them (ag;
#            AG_GGML_MATMUL_A=copy beside on the GPT): matmul 1024-4096, the GPT 12x768, the MLP 8x4096, the
#            transformer 4x256 and the convnet, then the GPT's picks (AG_GGML_LOG=info) and its step per ggml op
# An unknown part is refused before anything runs; a command that fails is reported and the rest go on, and the
# exit status is the first failure's. About 6 minutes for all of them but vkmatmul (about 4 more) on an H100.
set -uo pipefail
cd "$(dirname "$0")/.."
. bench/gpu-env.sh
R=.run/models
parts="gpt16 gpt32 convnet small vkmatmul"

prepare() {
  set -e
  gpu_env_download $R
  bash scripts/deps.sh ggml
  AG_GGML_COOPMAT=1 bash backend/native/ggml/build.sh
  local p
  p=$(AG_GGML_COOPMAT=1 bash backend/native/ggml/build.sh --print-prefix)
  CGO_CFLAGS="-I$p/include" CGO_LDFLAGS="-L$p/lib" go build -tags ggml -trimpath -ldflags="-s -w" -o $R/ag ./cmd/ag
  xz -T2 -6 -f $R/ag
  ls -la $R
}

fail=0
# ok NAME STATUS: remembers the first failed command's status; the parts go on.
ok() {
  if [ "$2" != 0 ]; then
    echo "!! $1 failed (exit $2)"
    [ $fail = 0 ] && fail=$2
  fi
  return 0
}

# peerRows prints a PyTorch peer's JSON (stdin), one result a line.
peerRows() {
  python3 -c 'import json, sys
for r in json.load(sys.stdin)["results"]:
    keys = [k for k in ("kind", "n", "dtype", "gpt", "width", "depth", "batch", "dropout", "precision", "amp", "mode") if k in r]
    print("torch", " ".join("%s=%s" % (k, r[k]) for k in keys), "median %.3f ms, min %.3f" % (r["median_ms"], r["min_ms"]))'
}

want() { case ",${MODELS_PARTS:-${parts// /,}}," in *",$1,"*) return 0 ;; esac; return 1; }

run() {
  local p
  p=${MODELS_PARTS:-}
  for p in ${p//,/ }; do
    case " $parts " in *" $p "*) ;; *) echo "gpu-models.sh run: MODELS_PARTS: \"$p\" is no part; want a comma-separated list of: ${parts// /, }" >&2; exit 2 ;; esac
  done
  [ -f $R/ag.xz ] || { echo "gpu-models.sh run: no $R/ag.xz: run 'bash bench/gpu-models.sh prepare' first and carry $R" >&2; exit 1; }
  O=${OUT:-/tmp/gpu-models}
  mkdir -p "$O"
  local S=/root/gpu-models
  mkdir -p $S
  cp $R/ag.xz $S/
  gpu_env_install $R || exit 1
  xz -dkf $S/ag.xz && chmod +x $S/ag
  local ag=$S/ag
  nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$O/gpu.txt"
  local gpt=(-matmul '' -batch '' -gpt 12x768 -gpt-ctx 512 -gpt-batch 8 -gpt-dropout 0 -modes captured)
  local small=(-matmul '' -batch '' -gpt 4x256 -gpt-ctx 128 -gpt-batch 32 -gpt-dropout 0.1 -modes captured)
  if want gpt16; then
    {
      timeout 90 $ag bench -device ggml-vulkan -reps 10 "${gpt[@]}" -precision f16 2>&1 | grep _step
      ok "ag gpt16" "${PIPESTATUS[0]}"
      (cd bench && timeout 90 python3 torch_gpt.py --gpt 12x768 --ctx 512 --batch 8 --dropout 0 --device cuda --cuda-graph --reps 10 --amp f16 | peerRows; exit "${PIPESTATUS[0]}")
      ok "torch gpt16" $?
      echo
      GGML_VK_PERF_LOGGER=1 timeout 90 $ag bench -device ggml-vulkan -reps 1 -warmup 0 "${gpt[@]}" -precision f16 >/dev/null 2>"$O/perf-gpt16.err"
      python3 bench/ggml_perop.py "$O/perf-gpt16.err" 45
      xz -f "$O/perf-gpt16.err"
    } > >(tee "$O/gpt16.txt") 2>&1
  fi
  if want gpt32; then
    {
      timeout 200 $ag bench -device webgpu,ggml-vulkan -reps 3 "${gpt[@]}" -profiled -ops 25 2>&1 | grep -v -E 'Warn|XDG|ggml_vulkan'
      ok "ag gpt32" "${PIPESTATUS[0]}"
      (cd bench && timeout 90 python3 torch_gpt.py --gpt 12x768 --ctx 512 --batch 8 --dropout 0 --device cuda --cuda-graph --reps 10 | peerRows; exit "${PIPESTATUS[0]}")
      ok "torch gpt32" $?
      echo
    } > >(tee "$O/gpt32.txt") 2>&1
  fi
  if want convnet; then
    {
      timeout 120 $ag bench -device webgpu,ggml-vulkan -reps 10 -matmul '' -batch '' -convnet 28 -convnet-batch 64,256 -modes captured 2>&1 | grep _step
      ok "ag convnet" "${PIPESTATUS[0]}"
      (cd bench && timeout 90 python3 torch_convnet.py --device cuda --cuda-graph --batch 64,256 --reps 10 | peerRows; exit "${PIPESTATUS[0]}")
      ok "torch convnet" $?
      echo
      GGML_VK_PERF_LOGGER=1 timeout 60 $ag bench -device ggml-vulkan -reps 1 -warmup 0 -matmul '' -batch '' -convnet 28 -convnet-batch 256 -modes captured >/dev/null 2>"$O/perf-convnet.err"
      python3 bench/ggml_perop.py "$O/perf-convnet.err" 25
      xz -f "$O/perf-convnet.err"
    } > >(tee "$O/convnet.txt") 2>&1
  fi
  if want small; then
    {
      timeout 120 $ag bench -device webgpu,ggml-vulkan -reps 10 "${small[@]}" 2>&1 | grep _step
      ok "ag small" "${PIPESTATUS[0]}"
      (cd bench && timeout 90 python3 torch_gpt.py --gpt 4x256 --ctx 128 --batch 32 --dropout 0.1 --device cuda --cuda-graph --reps 10 | peerRows; exit "${PIPESTATUS[0]}")
      ok "torch small" $?
      echo
      GGML_VK_PERF_LOGGER=1 timeout 60 $ag bench -device ggml-vulkan -reps 1 -warmup 0 "${small[@]}" >/dev/null 2>"$O/perf-small.err"
      python3 bench/ggml_perop.py "$O/perf-small.err" 25
      xz -f "$O/perf-small.err"
    } > >(tee "$O/small.txt") 2>&1
  fi
  if want vkmatmul; then
    {
      local v m
      for v in ggml tune ag copy; do
        m=$v a=rows
        [ $v = copy ] && m=ag a=copy
        if [ $v = copy ]; then echo "== AG_GGML_MATMUL=ag AG_GGML_MATMUL_A=copy"; else echo "== AG_GGML_MATMUL=$m"; fi
        [ $v = copy ] || { AG_GGML_MATMUL=$m timeout 60 $ag bench -device ggml-vulkan -matmul 1024,2048,4096 -batch '' -reps 10 2>&1 | grep " matmul"; ok "ag matmul $v" "${PIPESTATUS[0]}"; }
        AG_GGML_MATMUL=$m AG_GGML_MATMUL_A=$a timeout 90 $ag bench -device ggml-vulkan -reps 5 "${gpt[@]}" 2>&1 | grep _step
        ok "ag gpt32 $v" "${PIPESTATUS[0]}"
        [ $v = copy ] && continue
        AG_GGML_MATMUL=$m timeout 60 $ag bench -device ggml-vulkan -matmul '' -depth 8 -width 4096 -batch 1024,4096 -modes captured -reps 5 2>&1 | grep _step
        ok "ag mlp 8x4096 $v" "${PIPESTATUS[0]}"
        AG_GGML_MATMUL=$m timeout 60 $ag bench -device ggml-vulkan "${small[@]}" -reps 10 2>&1 | grep _step
        ok "ag small $v" "${PIPESTATUS[0]}"
        AG_GGML_MATMUL=$m timeout 60 $ag bench -device ggml-vulkan -matmul '' -batch '' -convnet 28 -convnet-batch 64,256 -modes captured -reps 10 2>&1 | grep _step
        ok "ag convnet $v" "${PIPESTATUS[0]}"
      done
      (cd bench && timeout 90 python3 torch_mlp.py --matmul 1024,2048,4096 --batch '' --depth 8 --width 4096 --device cuda --reps 10 | peerRows; exit "${PIPESTATUS[0]}")
      ok "torch matmul" $?
      echo
      echo "== the GPT's f32 products, each timed on both kernels (AG_GGML_LOG=info)"
      AG_GGML_LOG=info timeout 90 $ag bench -device ggml-vulkan -reps 1 -warmup 0 "${gpt[@]}" 2>&1 | grep "f32 product"
      GGML_VK_PERF_LOGGER=1 timeout 90 $ag bench -device ggml-vulkan -reps 1 -warmup 0 "${gpt[@]}" >/dev/null 2>"$O/perf-vkmatmul.err"
      python3 bench/ggml_perop.py "$O/perf-vkmatmul.err" 30
      xz -f "$O/perf-vkmatmul.err"
    } > >(tee "$O/vkmatmul.txt") 2>&1
  fi
  wait # for the last tee
  [ $fail = 0 ] || echo "gpu-models.sh run: a part failed (the first exit status: $fail)"
  return $fail
}

case "${1:-}" in
prepare) prepare ;;
run)
  run
  exit $?
  ;;
*)
  echo "usage: bash bench/gpu-models.sh prepare|run" >&2
  exit 2
  ;;
esac
