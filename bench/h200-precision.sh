#!/bin/bash
# The H200 run behind bench/results/h200-2026-12-03-*: the transformer step (ag bench -gpt) and
# the 8x4096 MLP step in f32 and f16 matmul precision, next to PyTorch CUDA (f32 and autocast f16).
# Build and carry as bench/h200.sh says (the Debian .debs and the gzipped ag binary in .run/),
# then on the GPU machine from the repository root: bash bench/h200-precision.sh (results in $OUT)
. bench/gpu-env.sh; gpu_env_install .run || exit 1
cd .run; gunzip -f *.gz; chmod +x ag; cd ..
R=.run; F='Warn|XDG|ggml_vulkan'
A="$R/ag bench -device webgpu,ggml-vulkan -reps 20"
timeout 200 $A -matmul 4096 -batch 1024 -width 4096 -depth 8 -modes captured -precision f32,f16 -json $OUT/ag-mlp.json 2>&1 | grep -v -E "$F"
timeout 200 $A -matmul "" -batch "" -gpt 4x256 -gpt-ctx 128 -gpt-batch 32 -modes lazy,captured -precision f32,f16 -json $OUT/ag-gpt.json 2>&1 | grep -v -E "$F"
P="import json,sys; d=json.load(open(sys.argv[1])); [print('torch', r['kind'], r.get('mode',''), r.get('n') or r.get('batch'), sys.argv[2], round(r['median_ms'],3), round(r['gflops'])) for r in d['results']]"
for amp in "" f16; do
  timeout 120 python3 bench/torch_gpt.py --device cuda --cuda-graph --gpt 4x256 --ctx 128 --batch 32 --reps 20 ${amp:+--amp $amp} > $OUT/torch-gpt$amp.json && python3 -c "$P" $OUT/torch-gpt$amp.json "${amp:-f32}"
  timeout 120 python3 bench/torch_mlp.py --device cuda --cuda-graph --matmul 4096 --batch 1024 --width 4096 --depth 8 --reps 20 ${amp:+--amp $amp} > $OUT/torch-mlp$amp.json && python3 -c "$P" $OUT/torch-mlp$amp.json "${amp:-f32}"
done
