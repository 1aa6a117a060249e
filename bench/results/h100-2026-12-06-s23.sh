#!/bin/bash
# Session 23's GPU call: ag "old" (b02f634, before the composites) and "new"
# (00a2b89: layer_norm, cross_entropy, relu_mask, gelu, dropout, sum_to,
# linear, softmax_ext, sum_squares composites) on ggml-vulkan and webgpu,
# next to PyTorch CUDA graph, in one call.
O=${OUT:-/tmp/s23}; mkdir -p $O
(cd .run && for f in *.deb; do dpkg -x "$f" /; done) && ldconfig
icd=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
[ -f $icd ] && export VK_DRIVER_FILES=${VK_DRIVER_FILES:-$icd}
for b in old new; do gunzip -kf .run/ag-$b.gz; chmod +x .run/ag-$b; done
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $O/gpu.txt
for b in old new; do
  echo "== nodes $b" | tee -a $O/nodes.txt
  AG_GGML_DUMP=1 .run/ag-$b bench -device ggml-vulkan -gpt 4x256 -reps 1 -warmup 0 -matmul '' -batch '' 2>&1 | grep "ggml nodes" | sort -t' ' -k5 -n | tail -1 | cut -c1-200 | tee -a $O/nodes.txt
  AG_GGML_DUMP=1 .run/ag-$b bench -device ggml-vulkan -convnet 28 -reps 1 -warmup 0 -matmul '' -batch '' 2>&1 | grep "ggml nodes" | sort -t' ' -k5 -n | tail -1 | cut -c1-200 | tee -a $O/nodes.txt
done
for r in a b; do
  for b in old new; do
    timeout 240 .run/ag-$b bench -reps 10 -device ggml-vulkan,webgpu -matmul '' -batch '' -gpt 4x256 -modes captured -convnet 28 -convnet-batch 64,256 -json $O/$b-$r.json > $O/$b-$r.txt 2>&1
    echo "== $b-$r rc=$?"; grep -v "^#" $O/$b-$r.txt | grep -i "gpt\|conv" | head -12
  done
done
timeout 200 python3 bench/torch_gpt.py --gpt 4x256 --ctx 128 --batch 32 --device cuda --cuda-graph > $O/torch-gpt.json 2>$O/torch-gpt.err; echo "torch gpt rc=$?"; tail -c 600 $O/torch-gpt.json
for bs in 64 256; do timeout 120 python3 bench/torch_convnet.py --side 28 --batch $bs --device cuda --cuda-graph > $O/torch-conv-$bs.json 2>$O/torch-conv.err; echo "torch conv $bs rc=$?"; tail -c 400 $O/torch-conv-$bs.json; done
