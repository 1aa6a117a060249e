#!/bin/bash
# Session 27's GPU call: ggml-vulkan built with its tensor-core shaders by the
# default `make vulkan` of a GPU machine (AG_GGML_COOPMAT=auto, trixie's glslc):
# which matrix cores ggml picks, the native conformance (f32 must stay f32),
# the GPT 12x768 (ctx 512, batch 8) and the 8x4096 MLP (batch 1024) in f32 and
# f16, PyTorch CUDA graph f32 and autocast beside; the GPT step per op.
O=${OUT:-/tmp/s27a}; mkdir -p $O; S=/root/s27; mkdir -p $S
cp .run/c3/* $S/
(cd $S && for f in *.deb; do dpkg -x "$f" /; done) && ldconfig
icd=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
[ -f $icd ] && export VK_DRIVER_FILES=${VK_DRIVER_FILES:-$icd}
for b in ag-coop native-coop.test; do xz -dkf $S/$b.xz; chmod +x $S/$b; done
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $O/gpu.txt
AG_GGML_LOG=debug $S/ag-coop devices 2>&1 | grep -E 'matrix cores' | head -2 | tee $O/matrix-cores.txt
F='Warn|XDG|ggml_vulkan'
A="$S/ag-coop bench -device ggml-vulkan -reps 10 -matmul '' -batch ''"
timeout 150 $S/ag-coop bench -device ggml-vulkan -reps 10 -matmul '' -batch '' -gpt 12x768 -gpt-ctx 512 -gpt-batch 8 -gpt-dropout 0 -modes captured -precision f32,f16 > $O/gpt12.txt 2>&1; echo "== gpt12 rc=$?"; grep "_step" $O/gpt12.txt
timeout 120 $S/ag-coop bench -device ggml-vulkan -reps 10 -matmul '' -batch '' -gpt 12x768 -gpt-ctx 512 -gpt-batch 8 -gpt-dropout 0 -modes captured -precision f16 -store16 > $O/gpt12-store.txt 2>&1; echo "== gpt12 store16 rc=$?"; grep "_step" $O/gpt12-store.txt
timeout 120 $S/ag-coop bench -device ggml-vulkan -reps 10 -matmul '4096' -batch 1024 -width 4096 -depth 8 -modes captured -precision f32,f16 > $O/mlp.txt 2>&1; echo "== mlp rc=$?"; grep "_step\|matmul" $O/mlp.txt
(cd bench && timeout 120 python3 torch_gpt.py --gpt 12x768 --ctx 512 --batch 8 --dropout 0 --device cuda --cuda-graph --reps 10 > $O/torch-gpt12.json 2>$O/torch.err; echo "== torch gpt12 f32 rc=$?"; tail -c 250 $O/torch-gpt12.json; echo
 for a in f16 bf16; do timeout 120 python3 torch_gpt.py --gpt 12x768 --ctx 512 --batch 8 --dropout 0 --device cuda --cuda-graph --reps 10 --amp $a > $O/torch-gpt12-$a.json 2>>$O/torch.err; echo "== torch gpt12 $a rc=$?"; tail -c 250 $O/torch-gpt12-$a.json; echo; done
 timeout 120 python3 torch_mlp.py --device cuda --cuda-graph --matmul 4096 --batch 1024 --width 4096 --depth 8 --reps 10 > $O/torch-mlp.json 2>>$O/torch.err; echo "== torch mlp rc=$?"; tail -c 300 $O/torch-mlp.json; echo
 timeout 120 python3 torch_mlp.py --device cuda --cuda-graph --matmul '' --batch 1024 --width 4096 --depth 8 --reps 10 --amp f16 > $O/torch-mlp-f16.json 2>>$O/torch.err; echo "== torch mlp f16 rc=$?"; tail -c 300 $O/torch-mlp-f16.json; echo)
GGML_VK_PERF_LOGGER=1 timeout 90 $S/ag-coop bench -device ggml-vulkan -reps 1 -warmup 0 -matmul '' -batch '' -gpt 12x768 -gpt-ctx 512 -gpt-batch 8 -gpt-dropout 0 -modes captured -precision f16 > /dev/null 2> $O/perf-gpt12-f16.err
echo "== ggml-vulkan GPT 12x768 f16 per op (us a step, summed over the last printed step)"
awk -F'[:x]' '/ x .* us/{n=$1; c=$2; t=$3; gsub(/ us/,"",t); tot[n]=c*t} END{for(k in tot) printf "%10.1f %s\n", tot[k], k}' $O/perf-gpt12-f16.err | sort -rn | head -15
timeout 120 $S/ag-coop bench -reps 3 -device webgpu,ggml-vulkan -matmul '' -batch '' -gpt 12x768 -gpt-ctx 512 -gpt-batch 8 -gpt-dropout 0 -modes captured -profiled -ops 12 > $O/gpt12-ops.txt 2>&1; echo "== gpt12 per op rc=$?"; grep "_step\|profiled " $O/gpt12-ops.txt
(cd backend/native && timeout 200 $S/native-coop.test -test.run TestConformance -test.v > $O/native-conf.txt 2>&1); echo "== native conformance rc=$? pass=$(grep -c -- '--- PASS' $O/native-conf.txt) fail=$(grep -c -- '--- FAIL' $O/native-conf.txt)"
grep -A3 -- '--- FAIL' $O/native-conf.txt | head -20
