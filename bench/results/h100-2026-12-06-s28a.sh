#!/bin/bash
# Session 28's first GPU call: the f16 GPT 12x768 (ctx 512, batch 8) and 8x4096 MLP (batch 1024) steps on
# ggml-vulkan's tensor cores, the head of session 27 (ag-head) beside this session's (ag-new: a round's cast
# back to f32 only where read), PyTorch CUDA graph autocast beside; each step per op (GGML_VK_PERF_LOGGER).
O=${OUT:-/tmp/s28a}; mkdir -p $O; S=/root/s28; mkdir -p $S
cp .run/c4/*.deb .run/c4/*.xz $S/
(cd $S && for f in *.deb; do dpkg -x "$f" /; done) && ldconfig
icd=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
[ -f $icd ] && export VK_DRIVER_FILES=${VK_DRIVER_FILES:-$icd}
for b in ag-head ag-new; do xz -dkf $S/$b.xz; chmod +x $S/$b; done
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $O/gpu.txt
AG_GGML_LOG=debug $S/ag-new devices 2>&1 | grep -E 'matrix cores' | head -1 | tee $O/matrix-cores.txt
G="-device ggml-vulkan -reps 10 -matmul '' -batch '' -gpt 12x768 -gpt-ctx 512 -gpt-batch 8 -gpt-dropout 0 -modes captured"
for r in 1 2; do for b in ag-head ag-new; do
  eval timeout 100 $S/$b bench $G -precision f16 > $O/gpt12-$b-$r.txt 2>&1; echo "== gpt12 f16 $b rc=$?"; grep "_step" $O/gpt12-$b-$r.txt
done; done
M="-device ggml-vulkan -reps 10 -matmul '' -batch 1024 -width 4096 -depth 8 -modes captured"
for b in ag-head ag-new; do eval timeout 100 $S/$b bench $M -precision f16 > $O/mlp-$b.txt 2>&1; echo "== mlp f16 $b rc=$?"; grep "_step" $O/mlp-$b.txt; done
(cd bench && for a in bf16 f16; do timeout 100 python3 torch_gpt.py --gpt 12x768 --ctx 512 --batch 8 --dropout 0 --device cuda --cuda-graph --reps 10 --amp $a > $O/torch-gpt12-$a.json 2>>$O/torch.err; echo "== torch gpt12 $a rc=$?"; tail -c 200 $O/torch-gpt12-$a.json; echo; done
 timeout 100 python3 torch_mlp.py --device cuda --cuda-graph --matmul '' --batch 1024 --width 4096 --depth 8 --reps 10 --amp f16 > $O/torch-mlp-f16.json 2>>$O/torch.err; echo "== torch mlp f16 rc=$?"; tail -c 200 $O/torch-mlp-f16.json; echo)
perop() { awk -F'[:x]' '/ x .* us/{n=$1; c=$2; t=$3; gsub(/ us/,"",t); tot[n]=c*t} END{for(k in tot) printf "%10.1f %s\n", tot[k], k}' $1 | sort -rn | head -${2:-25}; }
eval GGML_VK_PERF_LOGGER=1 timeout 90 $S/ag-new bench $G -reps 1 -warmup 0 -precision f16 > /dev/null 2> $O/perf-gpt12-f16.err
echo "== ag-new GPT 12x768 f16 per op (us, the last step)"; perop $O/perf-gpt12-f16.err 40
eval GGML_VK_PERF_LOGGER=1 timeout 90 $S/ag-new bench $M -reps 1 -warmup 0 -precision f16 > /dev/null 2> $O/perf-mlp-f16.err
echo "== ag-new MLP 8x4096 f16 per op (us, the last step)"; perop $O/perf-mlp-f16.err 25
xz -T4 $O/perf-*.err
