#!/bin/bash
# Session 25's second GPU call: ggml-vulkan before (s25a = main 842c9c8 +
# bench -ops) and after (s25b) the native lowering's split-K for products
# of few tiles, short-axis sums as adds, and col2im as acc, beside webgpu
# and PyTorch CUDA graph, one call; GGML_VK_PERF_LOGGER of the convnet after.
O=${OUT:-/tmp/s25b}; mkdir -p $O
(cd .run && for f in *.deb; do dpkg -x "$f" /; done) && ldconfig
icd=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
[ -f $icd ] && export VK_DRIVER_FILES=${VK_DRIVER_FILES:-$icd}
for b in ag-s25a ag-s25b; do gunzip -kf .run/$b.gz; chmod +x .run/$b; done
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $O/gpu.txt
for b in s25a s25b; do
  for w in "-gpt 4x256" "-convnet 28"; do
    echo "== nodes $b $w: $(AG_GGML_DUMP=1 .run/ag-$b bench -device ggml-vulkan $w -reps 1 -warmup 0 -matmul '' -batch '' -modes captured 2>&1 | grep 'ggml nodes' | sort -t' ' -k5 -n | tail -1 | cut -c1-60)" | tee -a $O/nodes.txt
  done
done
for r in a b; do
  for b in s25a s25b; do
    timeout 200 .run/ag-$b bench -reps 10 -device ggml-vulkan -matmul '' -batch '' -gpt 4x256 -modes captured -convnet 28 -convnet-batch 64,256 -json $O/$b-$r.json > $O/$b-$r.txt 2>&1
    echo "== $b-$r rc=$?"; grep "_step" $O/$b-$r.txt
  done
done
timeout 100 .run/ag-s25b bench -reps 10 -device webgpu -matmul '' -batch '' -gpt 4x256 -modes captured -convnet 28 -convnet-batch 64,256 > $O/webgpu.txt 2>&1; echo "== webgpu rc=$?"; grep "_step" $O/webgpu.txt
for bs in 64 256; do
  GGML_VK_PERF_LOGGER=1 timeout 100 .run/ag-s25b bench -device ggml-vulkan -convnet 28 -convnet-batch $bs -reps 2 -warmup 0 -matmul '' -batch '' -modes captured > /dev/null 2> $O/perf-conv$bs.err
  awk '/^Vulkan Timings/{b=""} {b=b"\n"$0} END{print b}' $O/perf-conv$bs.err > $O/perf-conv$bs.txt; rm $O/perf-conv$bs.err; grep "Total time" $O/perf-conv$bs.txt
done
timeout 150 python3 bench/torch_gpt.py --gpt 4x256 --ctx 128 --batch 32 --device cuda --cuda-graph > $O/torch-gpt.json 2>$O/torch.err; echo "torch gpt rc=$?"
for bs in 64 256; do timeout 100 python3 bench/torch_convnet.py --side 28 --batch $bs --device cuda --cuda-graph > $O/torch-conv-$bs.json 2>>$O/torch.err; echo "torch conv $bs rc=$?"; done
python3 -c "
import json
for f in ['torch-gpt.json','torch-conv-64.json','torch-conv-256.json']:
    d=json.load(open('$O/'+f)); [print(f, r['kind'], r.get('batch'), r['mode'], round(r['median_ms'],3)) for r in d['results'] if r['mode']=='cuda_graph']
"
cd $O/.. && tar czf /tmp/s25b.tgz $(basename $O) && rm -rf $O && mkdir -p $O && mv /tmp/s25b.tgz $O/
