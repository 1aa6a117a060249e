#!/bin/bash
# Session 26's first GPU call: s25b (before session 25's batch-norm and
# review commits) against s26a (main 68acdfd + the view-extent check), the
# convnet and transformer on ggml-vulkan and webgpu, PyTorch CUDA graph
# beside; per-op profiles of the convnet at batch 256 on both backends.
O=${OUT:-/tmp/s26a}; mkdir -p $O
(cd .run && for f in *.deb; do dpkg -x "$f" /; done) && ldconfig
icd=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
[ -f $icd ] && export VK_DRIVER_FILES=${VK_DRIVER_FILES:-$icd}
for b in ag-s25b ag-s26a; do gunzip -kf .run/$b.gz; chmod +x .run/$b; done
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $O/gpu.txt
for r in a b; do
  for b in s25b s26a; do
    timeout 200 .run/ag-$b bench -reps 10 -device ggml-vulkan,webgpu -matmul '' -batch '' -gpt 4x256 -modes captured -convnet 28 -convnet-batch 64,256 > $O/$b-$r.txt 2>&1
    echo "== $b-$r rc=$?"; grep "_step" $O/$b-$r.txt
  done
done
timeout 150 python3 bench/torch_gpt.py --gpt 4x256 --ctx 128 --batch 32 --device cuda --cuda-graph > $O/torch-gpt.json 2>$O/torch.err; echo "torch gpt rc=$?"
for bs in 64 256; do timeout 100 python3 bench/torch_convnet.py --side 28 --batch $bs --device cuda --cuda-graph > $O/torch-conv-$bs.json 2>>$O/torch.err; echo "torch conv $bs rc=$?"; done
python3 -c "
import json
for f in ['torch-gpt.json','torch-conv-64.json','torch-conv-256.json']:
    d=json.load(open('$O/'+f)); [print(f, r['kind'], r.get('batch'), r['mode'], round(r['median_ms'],3)) for r in d['results'] if r['mode']=='cuda_graph']
" | tee $O/torch.txt
timeout 150 .run/ag-s26a bench -reps 5 -device webgpu,ggml-vulkan -matmul '' -batch '' -convnet 28 -convnet-batch 256 -modes captured -profiled -ops 15 > $O/conv-ops.txt 2>&1; echo "== conv ops rc=$?"
GGML_VK_PERF_LOGGER=1 timeout 100 .run/ag-s26a bench -device ggml-vulkan -convnet 28 -convnet-batch 256 -reps 2 -warmup 0 -matmul '' -batch '' -modes captured > /dev/null 2> $O/perf-conv256.err
AG_GGML_DUMP=2 timeout 100 .run/ag-s26a bench -device ggml-vulkan -convnet 28 -convnet-batch 256 -reps 1 -warmup 0 -matmul '' -batch '' -modes captured > $O/dump-conv256.txt 2>&1
cd $O/.. && tar czf /tmp/s26a.tgz $(basename $O) && rm -rf $O && mkdir -p $O && mv /tmp/s26a.tgz $O/
