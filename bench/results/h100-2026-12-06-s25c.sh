#!/bin/bash
# Session 25's third GPU call: s25b (split-K, short sums, col2im as acc)
# against s25c (main after the session's merges: batch norm and RMS norm
# composites native on ggml, webgpu's native sum_squares, GraphOf, the
# issue-42 work) on ggml-vulkan and webgpu, PyTorch CUDA graph beside; the
# GPT 12x768 step's per-op profile on both backends; GPT-2 124M natively.
O=${OUT:-/tmp/s25c}; mkdir -p $O
(cd .run && for f in *.deb; do dpkg -x "$f" /; done) && ldconfig
icd=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
[ -f $icd ] && export VK_DRIVER_FILES=${VK_DRIVER_FILES:-$icd}
for b in ag-s25b ag-s25c gpt2-s25c; do gunzip -kf .run/$b.gz; chmod +x .run/$b; done
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $O/gpu.txt
for b in s25b s25c; do
  for w in "-gpt 4x256" "-convnet 28"; do
    echo "== nodes $b $w: $(AG_GGML_DUMP=1 .run/ag-$b bench -device ggml-vulkan $w -reps 1 -warmup 0 -matmul '' -batch '' -modes captured 2>&1 | grep 'ggml nodes' | sort -t' ' -k5 -n | tail -1 | cut -c1-60)" | tee -a $O/nodes.txt
  done
done
for r in a b; do
  for b in s25b s25c; do
    timeout 200 .run/ag-$b bench -reps 10 -device ggml-vulkan,webgpu -matmul '' -batch '' -gpt 4x256 -modes captured -convnet 28 -convnet-batch 64,256 > $O/$b-$r.txt 2>&1
    echo "== $b-$r rc=$?"; grep "_step" $O/$b-$r.txt
  done
done
timeout 200 .run/ag-s25c bench -reps 5 -device webgpu,ggml-vulkan -matmul '' -batch '' -gpt 12x768 -gpt-ctx 512 -gpt-batch 8 -modes captured -profiled -ops 12 > $O/gpt12-ops.txt 2>&1; echo "== gpt12 rc=$?"; grep "_step\|profiled " $O/gpt12-ops.txt
GGML_VK_PERF_LOGGER=1 timeout 100 .run/ag-s25c bench -device ggml-vulkan -convnet 28 -convnet-batch 256 -reps 2 -warmup 0 -matmul '' -batch '' -modes captured > /dev/null 2> $O/perf-conv256.err
awk '/^Vulkan Timings/{b=""} {b=b"\n"$0} END{print b}' $O/perf-conv256.err > $O/perf-conv256.txt; rm $O/perf-conv256.err; grep "Total time" $O/perf-conv256.txt
timeout 150 python3 bench/torch_gpt.py --gpt 4x256 --ctx 128 --batch 32 --device cuda --cuda-graph > $O/torch-gpt.json 2>$O/torch.err; echo "torch gpt rc=$?"
timeout 150 python3 bench/torch_gpt.py --gpt 12x768 --ctx 512 --batch 8 --device cuda --cuda-graph > $O/torch-gpt12.json 2>>$O/torch.err; echo "torch gpt12 rc=$?"
for bs in 64 256; do timeout 100 python3 bench/torch_convnet.py --side 28 --batch $bs --device cuda --cuda-graph > $O/torch-conv-$bs.json 2>>$O/torch.err; echo "torch conv $bs rc=$?"; done
python3 -c "
import json
for f in ['torch-gpt.json','torch-gpt12.json','torch-conv-64.json','torch-conv-256.json']:
    d=json.load(open('$O/'+f)); [print(f, r['kind'], r.get('batch'), r['mode'], round(r['median_ms'],3)) for r in d['results'] if r['mode']=='cuda_graph']
" | tee $O/torch.txt
for db in ggml-vulkan:4 webgpu:4 webgpu:1; do
  d=${db%:*}; bs=${db#*:}
  echo "== gpt2 124M ctx 1024 batch $bs on $d"
  timeout 120 .run/gpt2-s25c -size 124M -ctx 1024 -batch $bs -steps 6 -eval-every 3 -sample 4 -device $d -text README.md 2>&1 | tail -8 | tee $O/gpt2-$d-$bs.txt
done
cd $O/.. && tar czf /tmp/s25c.tgz $(basename $O) && rm -rf $O && mkdir -p $O && mv /tmp/s25c.tgz $O/
