#!/bin/bash
# Session 28's last try with little device time: the f16 GPT 12x768 and MLP 8x4096 steps, session 27's
# head (ag-head) beside this session's (ag-new), and whether patch 0012's GELU mode passes its probe there.
S=/root/s28; mkdir -p $S; cp .run/c4/*.deb .run/c4/*.xz $S/
(cd $S && for f in *.deb; do dpkg -x "$f" /; done) && ldconfig
icd=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
[ -f $icd ] && export VK_DRIVER_FILES=${VK_DRIVER_FILES:-$icd}
for b in ag-head ag-new native-coop.test; do xz -dkf $S/$b.xz; chmod +x $S/$b; done
nvidia-smi --query-gpu=name --format=csv,noheader
(cd backend/native && timeout 40 $S/native-coop.test -test.run 'TestGeluBackOneNode' -test.v 2>&1 | grep -E "^(---|ok|FAIL)|probeGelu")
G="-reps 5 -warmup 0.5s -matmul '' -batch '' -gpt 12x768 -gpt-ctx 512 -gpt-batch 8 -gpt-dropout 0 -modes captured -precision f16"
M="-reps 5 -warmup 0.5s -matmul '' -batch 1024 -width 4096 -depth 8 -modes captured -precision f16"
for b in ag-head ag-new; do eval timeout 60 $S/$b bench -device ggml-vulkan $G 2>&1 | grep _step; done
for b in ag-head ag-new; do eval timeout 60 $S/$b bench -device ggml-vulkan $M 2>&1 | grep _step; done
