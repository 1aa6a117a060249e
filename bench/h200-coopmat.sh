#!/bin/bash
# ggml-vulkan with its tensor-core (cooperative-matrix) shaders on the H200: the native conformance
# (f32 x f32 must stay f32: ggml/patches/*.coopmat.patch) and matmul, the MLP step and the transformer step in f32 and f16 precision.
# Build and carry as bench/h200.sh says, but link the coopmat build of ggml (what `make vulkan` builds on a machine
# whose GPU offers VK_KHR_cooperative_matrix; AG_GGML_COOPMAT=1 forces it on this CPU machine; Debian trixie's
# glslc and Vulkan 1.4 headers from backend/native/ggml/glslc.sh in seconds, then 13-17 min of shaders, cached):
#   P=$(AG_GGML_COOPMAT=1 bash backend/native/ggml/build.sh); export CGO_CFLAGS=-I$P/include CGO_LDFLAGS=-L$P/lib
#   go build -tags ggml -ldflags="-s -w" -o .run/ag ./cmd/ag && go test -c -tags ggml -ldflags="-s -w" -o .run/native.test ./backend/native/
# then on the GPU machine from the repository root: bash bench/h200-coopmat.sh (results in $OUT)
. bench/gpu-env.sh; gpu_env_install .run || exit 1
cd .run; gunzip -f *.gz; chmod +x ag *.test; cd ..
R=.run; F='Warn|XDG|ggml_vulkan'
nvidia-smi -L
AG_GGML_LOG=debug $R/ag devices 2>&1 | grep -E 'matrix cores' | head -2   # want "matrix cores: NV_coopmat2"
$R/native.test -test.run 'TestConformance' -test.v > $OUT/native-conf.txt 2>&1; echo "native conformance rc=$? pass=$(grep -c -- '--- PASS' $OUT/native-conf.txt) fail=$(grep -c -- '--- FAIL' $OUT/native-conf.txt)"
grep -A3 -- '--- FAIL' $OUT/native-conf.txt | head -20
A="$R/ag bench -device ggml-vulkan -reps 20"
timeout 200 $A -matmul 1024,2048,4096 -batch "" -modes captured -precision f32,f16 -json $OUT/ag-matmul.json 2>&1 | grep -v -E "$F"
timeout 200 $A -matmul 4096 -batch 1024 -width 4096 -depth 8 -modes captured -precision f32,f16 -json $OUT/ag-mlp.json 2>&1 | grep -v -E "$F"
timeout 200 $A -matmul "" -batch 1024 -width 4096 -depth 8 -modes captured -precision f16 -store16 -json $OUT/ag-mlp-store.json 2>&1 | grep -v -E "$F"   # f16 activation storage too
timeout 200 $A -matmul "" -batch "" -gpt 4x256 -gpt-ctx 128 -gpt-batch 32 -modes captured -precision f32,f16 -json $OUT/ag-gpt.json 2>&1 | grep -v -E "$F"
