#!/usr/bin/env bash
# Runs ag's benchmark and the PyTorch peer alternately in one session, on the
# same CPU, and prints the ratios pair by pair (these machines are noisy:
# only ratios measured side by side mean anything).
#   bench/side_by_side.sh [rounds] [ag device]
# Needs Debian's python3-torch and libopenblas0-pthread (apt-get install).
set -euo pipefail
cd "$(dirname "$0")/.."
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
  env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE /usr/bin/python3 bench/torch_mlp.py > "$out/torch-$r.json"
done
python3 - "$out" "$rounds" <<'PY'
import json, sys
out, rounds = sys.argv[1], int(sys.argv[2])
def key(r):
    return (r["kind"], r.get("n") or r.get("batch"))
print(f"{'round':>5} {'kind':<9} {'size':>5} {'ag ms':>9} {'torch ms':>9} {'torch/ag':>9}")
for i in range(1, rounds + 1):
    ag = {key(r): r for r in json.load(open(f"{out}/ag-{i}.json"))["results"]}
    th = {key(r): r for r in json.load(open(f"{out}/torch-{i}.json"))["results"]}
    for k in ag:
        if k in th:
            a, t = ag[k]["median_ms"], th[k]["median_ms"]
            print(f"{i:>5} {k[0]:<9} {k[1]:>5} {a:>9.2f} {t:>9.2f} {t/a:>8.2f}x")
PY
