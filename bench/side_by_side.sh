#!/usr/bin/env bash
# Runs ag's benchmark and the PyTorch peer alternately in one session, on the
# same CPU, and prints the ratios pair by pair (these machines are noisy:
# only ratios measured side by side mean anything).
#   bench/side_by_side.sh [rounds] [ag devices, comma-separated]
# Needs Debian's python3-torch and libopenblas0-pthread: installed when missing
# (scripts/deps.sh peers).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/deps.sh peers
# Debian's torch calls the system libblas.so.3, which must be OpenBLAS's
blas=$(readlink -f /usr/lib/x86_64-linux-gnu/libblas.so.3 || true)
case "$blas" in *openblas*) ;; *) echo "bench-peers: libblas.so.3 is $blas, not OpenBLAS: PyTorch would run on the reference BLAS (update-alternatives --config libblas.so.3-x86_64-linux-gnu)" >&2; exit 1 ;; esac
# PyTorch's CPU allocator takes each tensor of more than 128 KiB from glibc,
# which maps it fresh (mmap) and unmaps it on free: every step then pays a
# page fault per 4 KiB of its activations, gradients and Adam temporaries.
# On these machines that made torch's 4x1024 step 85-125 ms instead of 15.
# These keep freed memory in the heap for reuse (PyTorch's own performance
# tuning guide suggests tcmalloc or jemalloc for the same reason); ag's CPU
# backend plans its memory and allocates nothing per step.
torch_malloc=(MALLOC_MMAP_THRESHOLD_=33554432 MALLOC_TRIM_THRESHOLD_=4294967296 MALLOC_TOP_PAD_=268435456)
# PyTorch sizes its pool by the physical cores its cpuinfo finds, which on
# some VMs is one of two (its OpenBLAS then runs one thread too, half the
# machine), so it gets every CPU ag's backend uses, stated.
threads=$(nproc)
rounds=${1:-3}
device=${2:-cpu}
out=${AG_BENCH_OUT:-bench/out}
mkdir -p "$out"
tags=()
prefix=$(bash backend/native/ggml/build.sh --print-prefix 2>/dev/null || true)
if [ -n "$prefix" ] && [ -f "$prefix/.built" ]; then
  tags=(-tags ggml)
  export CGO_CFLAGS="-I$prefix/include" CGO_LDFLAGS="-L$prefix/lib"
fi
go build "${tags[@]}" -o "$out/ag" ./cmd/ag
for r in $(seq 1 "$rounds"); do
  "$out/ag" bench -device "$device" -json "$out/ag-$r.json" >/dev/null
  env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE "${torch_malloc[@]}" /usr/bin/python3 bench/torch_mlp.py --threads "$threads" > "$out/torch-$r.json"
done
python3 - "$out" "$rounds" <<'PY'
import json, sys
out, rounds = sys.argv[1], int(sys.argv[2])
def size(r):
    return r.get("n") or r.get("batch")
print(f"PyTorch {json.load(open(f'{out}/torch-1.json'))['threads']} threads")
print(f"{'round':>5} {'ag device':<12} {'kind':<18} {'size':>5} {'ag ms':>9} {'torch ms':>9} {'torch/ag':>9}")
for i in range(1, rounds + 1):
    th = {(r["kind"], size(r)): r for r in json.load(open(f"{out}/torch-{i}.json"))["results"]
          if r.get("mode", "eager") == "eager"}
    for r in json.load(open(f"{out}/ag-{i}.json"))["results"]:
        t = th.get((r["kind"], size(r)))
        if t:
            kind = r["kind"] + (" " + r["mode"] if r.get("mode") else "")
            a, b = r["median_ms"], t["median_ms"]
            print(f"{i:>5} {r['device']:<12} {kind:<18} {size(r):>5} {a:>9.2f} {b:>9.2f} {b/a:>8.2f}x")
PY
