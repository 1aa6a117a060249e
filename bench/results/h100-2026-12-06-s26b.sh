#!/bin/bash
# Session 26's second GPU call (the second of the Chromium shipping calls):
# s26a (main 68acdfd + the view-extent check) against s26b (with the
# session's merges: ggml-vulkan's max-pool gradient and OpMax reductions),
# the convnet and transformer on ggml-vulkan and webgpu in one call.
O=${OUT:-/tmp/s26b}; mkdir -p $O; S=/root/s26
(cd $S && for f in *.deb; do dpkg -x "$f" /; done) && ldconfig
icd=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
[ -f $icd ] && export VK_DRIVER_FILES=${VK_DRIVER_FILES:-$icd}
for b in ag-s26a ag-s26b; do xz -dkf $S/$b.xz; chmod +x $S/$b; done
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $O/gpu.txt
for b in s26a s26b; do
  echo "== nodes $b -convnet 28: $(AG_GGML_DUMP=1 $S/ag-$b bench -device ggml-vulkan -convnet 28 -reps 1 -warmup 0 -matmul '' -batch '' -modes captured 2>&1 | grep 'ggml nodes' | sort -t' ' -k5 -n | tail -1 | cut -c1-60)" | tee -a $O/nodes.txt
done
for r in a; do
  for b in s26a s26b; do
    timeout 100 $S/ag-$b bench -reps 10 -device ggml-vulkan,webgpu -matmul '' -batch '' -gpt 4x256 -modes captured -convnet 28 -convnet-batch 64,256 > $O/$b-$r.txt 2>&1
    echo "== $b-$r rc=$?"; grep "_step" $O/$b-$r.txt
  done
done
GGML_VK_PERF_LOGGER=1 timeout 60 $S/ag-s26b bench -device ggml-vulkan -convnet 28 -convnet-batch 256 -reps 2 -warmup 0 -matmul '' -batch '' -modes captured > /dev/null 2> $O/perf-conv256.err
awk -F'[:x]' '/ x .* us/{n=$1; c=$2; t=$3; gsub(/ us/,"",t); tot[n]=c*t} END{for(k in tot) printf "%10.1f %s\n", tot[k], k}' $O/perf-conv256.err | sort -rn | head -12

#!/bin/bash
# Session 26's GPU call: s26b.sh (the convnet and transformer, s26a vs
# s26b), then GPT-2 124M natively on webgpu at ctx 1024 batch 4 on 4 MB of
# Go source until its smoothed loss is below the text's unigram entropy
# (examples/gpt2 from .chr/gpt2.tar.xz), and PyTorch's step of the same
# model beside (bench/torch_gpt.py --gpt2, CUDA graph).
O=${OUT:-/tmp/s26c}; mkdir -p $O
bash /root/s26/s26b.sh
g=/root/g2; rm -rf $g && mkdir -p $g && tar -C $g -xJf .chr/gpt2.tar.xz
(cd $g && timeout ${G2T:-240} ./gpt2 -size 124M -ctx 1024 -batch 4 -vocab 50257 -steps ${G2STEPS:-200} -eval-every 10 -sample 0 -device webgpu -text $g/text.txt) > $O/gpt2-native.txt 2>&1
echo "== gpt2 native rc=$?"; grep -v "^\s*$" $O/gpt2-native.txt | head -40
(cd bench && timeout 150 python3 torch_gpt.py --gpt2 --vocab 50257 --gpt 12x768 --ctx 1024 --batch 4 --device cuda --cuda-graph --reps 10 > $O/gpt2-torch.json 2>$O/gpt2-torch.err); echo "== torch gpt2 rc=$?"
python3 -c "import json,sys; j=json.load(open(sys.argv[1])); [print('pytorch %s %s: %s, %d parameters, batch %d, ctx %d: median %.2f ms/step, min %.2f' % (j['version'], r['kind'], r['mode'], r['params'], r['batch'], r['context'], r['median_ms'], r['min_ms'])) for r in j['results']]" $O/gpt2-torch.json
tail -3 $O/gpt2-torch.err
