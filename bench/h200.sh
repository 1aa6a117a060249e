#!/bin/bash
# The H200 run behind bench/results: conformance of both GPU backends, nn and
# buffer tests on both, ag bench next to PyTorch CUDA, and a profiled demo.
# The GPU machine has no Go, ggml or Vulkan loader: build here, carry them.
#   mkdir -p .run && cp <Debian libvulkan1, libgomp1 .debs> .run/
#   P=$(bash backend/native/ggml/build.sh --print-prefix); export CGO_CFLAGS=-I$P/include CGO_LDFLAGS=-L$P/lib
#   go build -tags ggml -ldflags="-s -w" -o .run/ag ./cmd/ag
#   for p in backend/native backend/webgpu nn buffer; do
#     go test -c -tags ggml -ldflags="-s -w" -o .run/$(basename $p).test ./$p/; done
#   gzip -9 .run/ag .run/*.test     # the carried folder must stay under 64 MB
# then on the GPU machine, from the repository root: bash bench/h200.sh  (results in $OUT)
cd .run; for f in *.deb; do dpkg -x $f / ; done; ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
gunzip -f *.gz; chmod +x ag *.test; cd ..
R=.run; F='Warn|XDG|ggml_vulkan'
nvidia-smi -L
$R/ag devices 2>&1 | grep -v -E "$F"
for t in webgpu native; do
  $R/$t.test -test.run 'TestConformance' -test.v > $OUT/$t-conf.txt 2>&1; echo "$t conformance rc=$? pass=$(grep -c -- '--- PASS' $OUT/$t-conf.txt) fail=$(grep -c -- '--- FAIL' $OUT/$t-conf.txt)"
done
for d in webgpu ggml-vulkan; do
  AG_TEST_DEVICE=$d $R/nn.test > /tmp/nn.txt 2>&1; echo "nn on $d rc=$? $(tail -1 /tmp/nn.txt)"
  AG_TEST_DEVICE=$d $R/buffer.test > /tmp/buf.txt 2>&1; echo "buffer on $d rc=$? $(tail -1 /tmp/buf.txt)"
done
$R/ag bench -device webgpu,ggml-vulkan -matmul 1024,2048,4096 -batch 64,256,1024 -modes eager,lazy,captured -reps 20 -json $OUT/ag.json 2>&1 | grep -v -E "$F"
python3 bench/torch_mlp.py --device cuda --cuda-graph --matmul 1024,2048,4096 --batch 64,256,1024 --reps 20 > $OUT/torch.json
python3 -c "
import json; d=json.load(open('$OUT/torch.json'))
for r in d['results']: print('torch', r['kind'], r.get('mode',''), r.get('n') or r.get('batch'), round(r['median_ms'],3), round(r['gflops']))"
echo "== repeat (captured outlier check)"
$R/ag bench -device webgpu,ggml-vulkan -matmul 4096 -batch 256,1024 -modes lazy,captured -reps 20 2>&1 | grep -v -E "$F"
$R/ag demo -device auto -steps 30 -profile -profile-json $OUT/h200-profile.json -trace $OUT/h200-trace.json 2>&1 | grep -v -E "$F" | tail -45
