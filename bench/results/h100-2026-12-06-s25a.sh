#!/bin/bash
# Session 25's first GPU call (diagnostic): where ggml-vulkan's and webgpu's
# step time goes on the GPU, per ggml op (GGML_VK_PERF_LOGGER, GPU timestamps)
# and per ag op (ag bench -profiled -ops), for the transformer 4x256, the
# convnet and the GPT 12x768 (ctx 512, batch 8); PyTorch CUDA graph beside.
O=${OUT:-/tmp/s25a}; mkdir -p $O
(cd .run && for f in *.deb; do dpkg -x "$f" /; done) && ldconfig
icd=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
[ -f $icd ] && export VK_DRIVER_FILES=${VK_DRIVER_FILES:-$icd}
gunzip -kf .run/ag-s25a.gz; chmod +x .run/ag-s25a; A=.run/ag-s25a
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $O/gpu.txt
B="-matmul '' -batch '' -modes captured"
for w in "-gpt 4x256" "-convnet 28 -convnet-batch 64" "-convnet 28 -convnet-batch 256" "-gpt 12x768 -gpt-ctx 512 -gpt-batch 8"; do
  n=$(echo $w | tr -c 'a-z0-9\n' _)
  GGML_VK_PERF_LOGGER=1 timeout 120 $A bench -device ggml-vulkan $w -reps 2 -warmup 0 -matmul '' -batch '' -modes captured > $O/perf-$n.out 2> $O/perf-$n.err
  echo "== perf $w rc=$?"; awk '/^Vulkan Timings/{b=""} {b=b"\n"$0} END{print b}' $O/perf-$n.err | sort -t'x' -k1 | tail -60 > $O/perf-$n.txt; grep "Total time" $O/perf-$n.txt
  timeout 200 $A bench -device ggml-vulkan,webgpu $w -reps 10 -matmul '' -batch '' -modes captured -profiled -ops 14 > $O/ops-$n.txt 2>&1
  echo "== ops $w rc=$?"; grep "_step\|profiled " $O/ops-$n.txt
done
timeout 150 python3 bench/torch_gpt.py --gpt 4x256 --ctx 128 --batch 32 --device cuda --cuda-graph > $O/torch-gpt.json 2>$O/torch-gpt.err; echo "torch gpt rc=$?"; tail -c 300 $O/torch-gpt.json
timeout 150 python3 bench/torch_gpt.py --gpt 12x768 --ctx 512 --batch 8 --device cuda --cuda-graph > $O/torch-gpt12.json 2>>$O/torch-gpt.err; echo "torch gpt12 rc=$?"; tail -c 300 $O/torch-gpt12.json
for bs in 64 256; do timeout 100 python3 bench/torch_convnet.py --side 28 --batch $bs --device cuda --cuda-graph > $O/torch-conv-$bs.json 2>$O/torch-conv.err; echo "torch conv $bs rc=$?"; tail -c 200 $O/torch-conv-$bs.json; done
cd $O/.. && tar czf /tmp/s25a.tgz $(basename $O) && rm -rf $O && mkdir -p $O && mv /tmp/s25a.tgz $O/
