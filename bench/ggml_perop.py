"""ggml_perop.py FILE [N]: where a step's GPU time goes on ggml-vulkan, from GGML_VK_PERF_LOGGER=1's stderr.

The logger prints one block per graph compute (a captured step is one graph); this takes the last block and prints
its total, the time per ggml op, and the N costliest op names (a product's name has its shape) with their calls, share
and, for products, TFLOP/s. bench/gpu-models.sh runs it; by hand:
  GGML_VK_PERF_LOGGER=1 ag bench -device ggml-vulkan -reps 1 -warmup 0 ... 2> perf.err; python3 bench/ggml_perop.py perf.err 40
"""
import re, sys, collections
lines = open(sys.argv[1], errors='replace').read().splitlines()
n = int(sys.argv[2]) if len(sys.argv) > 2 else 40
# blocks start at "Vulkan Timings:" lines; keep the last complete block
blocks, cur = [], None
for ln in lines:
    if ln.startswith('----------------') or 'Vulkan Timings' in ln:
        if cur: blocks.append(cur)
        cur = []
        continue
    if cur is not None and re.search(r': \d+ x [\d.]+ us', ln):
        cur.append(ln)
if cur: blocks.append(cur)
if not blocks:
    print('perop: no timings in', sys.argv[1]); sys.exit(0)
blk = blocks[-1]
tot = collections.OrderedDict(); cnt = collections.Counter(); fl = collections.Counter()
for ln in blk:
    m = re.match(r'(.*): (\d+) x ([\d.]+) us(?: \(([\d.]+) GFLOPS/s\))?', ln)
    if not m: continue
    name, c, t = m.group(1).strip(), int(m.group(2)), float(m.group(3))
    tot[name] = tot.get(name, 0) + c * t; cnt[name] += c
    if m.group(4): fl[name] += c * t * float(m.group(4)) * 1e3  # flops = us * GFLOP/s * 1e3
S = sum(tot.values())
print(f'{len(blocks)} blocks; last: {len(blk)} lines, {S/1e3:.2f} ms summed over ops')
byop = collections.Counter()
for k, v in tot.items(): byop[k.split()[0]] += v
print('  by op: ' + ', '.join(f'{k} {v/1e3:.2f}' for k, v in byop.most_common(14)))
for k, v in sorted(tot.items(), key=lambda kv: -kv[1])[:n]:
    extra = f'  {fl[k]/v/1e6:7.1f} TFLOP/s' if fl[k] else ''
    print(f'{v:10.1f} us {cnt[k]:5d}x {100*v/S:5.1f}%  {k}{extra}')
