#!/bin/bash
# Session 24's second GPU call: the convnet after im2col and max_pool2d
# composites reached ggml-vulkan (s24c, main 6bbf918) beside s24 (fa1569f,
# before them) and PyTorch CUDA graph, one call.
O=${OUT:-/tmp/s24c}; mkdir -p $O
(cd .run && for f in *.deb; do dpkg -x "$f" /; done) && ldconfig
icd=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
[ -f $icd ] && export VK_DRIVER_FILES=${VK_DRIVER_FILES:-$icd}
for b in ag-s24 ag-s24c; do gunzip -kf .run/$b.gz; chmod +x .run/$b; done
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $O/gpu.txt
for b in s24 s24c; do
  echo "== nodes $b: $(AG_GGML_DUMP=1 .run/ag-$b bench -device ggml-vulkan -convnet 28 -reps 1 -warmup 0 -matmul '' -batch '' 2>&1 | grep 'ggml nodes' | sort -t' ' -k5 -n | tail -1 | cut -c1-70)" | tee -a $O/nodes.txt
done
for r in a b; do
  for b in s24 s24c; do
    timeout 150 .run/ag-$b bench -reps 10 -device ggml-vulkan,webgpu -matmul '' -batch '' -convnet 28 -convnet-batch 64,256 -json $O/$b-$r.json > $O/$b-$r.txt 2>&1
    echo "== $b-$r rc=$?"; grep -v "^#" $O/$b-$r.txt | grep -v "measuring\|wrote"
  done
done
for bs in 64 256; do timeout 100 python3 bench/torch_convnet.py --side 28 --batch $bs --device cuda --cuda-graph > $O/torch-conv-$bs.json 2>$O/torch-conv.err; echo "torch conv $bs rc=$?"; python3 -c "import json;d=json.load(open('$O/torch-conv-$bs.json'));[print(r['kind'],r.get('batch'),r['mode'],round(r['median_ms'],3)) for r in d['results']]"; done
