#!/bin/bash
# Session 24's GPU call: ag s23 (eb75f4d-era binary, before this session) and
# s24 (main: adamw grad scale, LN back kernel, im2col on ggml-cpu, Philox
# draws on ggml-vulkan) on ggml-vulkan and webgpu, next to PyTorch CUDA
# graph, in one call; then GPT-2 small natively for a few steps.
O=${OUT:-/tmp/s24}; mkdir -p $O
(cd .run && for f in *.deb; do dpkg -x "$f" /; done) && ldconfig
icd=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
[ -f $icd ] && export VK_DRIVER_FILES=${VK_DRIVER_FILES:-$icd}
for b in ag-s23 ag-s24 gpt2-s24; do gunzip -kf .run/$b.gz; chmod +x .run/$b; done
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $O/gpu.txt
for b in s23 s24; do
  echo "== nodes $b" | tee -a $O/nodes.txt
  for w in "-gpt 4x256" "-convnet 28"; do
    AG_GGML_DUMP=1 .run/ag-$b bench -device ggml-vulkan $w -reps 1 -warmup 0 -matmul '' -batch '' 2>&1 | grep "ggml nodes" | sort -t' ' -k5 -n | tail -1 | cut -c1-120 | tee -a $O/nodes.txt
  done
done
for r in a b; do
  for b in s23 s24; do
    timeout 200 .run/ag-$b bench -reps 10 -device ggml-vulkan,webgpu -matmul '' -batch '' -gpt 4x256 -modes captured -convnet 28 -convnet-batch 64,256 -json $O/$b-$r.json > $O/$b-$r.txt 2>&1
    echo "== $b-$r rc=$?"; grep -v "^#" $O/$b-$r.txt | grep -i "gpt\|conv" | head -12
  done
done
timeout 150 python3 bench/torch_gpt.py --gpt 4x256 --ctx 128 --batch 32 --device cuda --cuda-graph > $O/torch-gpt.json 2>$O/torch-gpt.err; echo "torch gpt rc=$?"; tail -c 600 $O/torch-gpt.json
for bs in 64 256; do timeout 100 python3 bench/torch_convnet.py --side 28 --batch $bs --device cuda --cuda-graph > $O/torch-conv-$bs.json 2>$O/torch-conv.err; echo "torch conv $bs rc=$?"; tail -c 400 $O/torch-conv-$bs.json; done
for d in webgpu ggml-vulkan; do
  echo "== gpt2 124M ctx 1024 batch 4 on $d"
  timeout 120 .run/gpt2-s24 -size 124M -ctx 1024 -batch 4 -steps 6 -eval-every 3 -sample 4 -device $d -text README.md 2>&1 | tail -12 | tee $O/gpt2-$d.txt
done
