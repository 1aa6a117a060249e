#!/usr/bin/env python3
"""Issue 14's goals as ratios, from one bench/h200.sh run's JSON files.

    python3 bench/h200_table.py DIR

DIR holds what `bench/h200.sh run` wrote: ag-4x1024.json, torch-4x1024.json,
ag-later.json, ag-8x4096.json, torch-8x4096.json, ag-splitk2048.json (any
may be missing: its rows are left out, saying so). Each ratio divides two
medians measured in that one run; a time ratio below 1 means ag is faster,
a speed ratio (matmul) above 1 means ag is faster.
"""
import json
import os
import sys


def load(d, name):
    p = os.path.join(d, name)
    if not os.path.exists(p):
        print(f"  ({name} missing: its rows are left out)")
        return None
    try:
        with open(p) as f:
            return json.load(f)["results"]
    except (ValueError, KeyError) as e:
        # a peer that failed leaves an empty or partial file
        print(f"  ({name} unreadable, {type(e).__name__}: {e}; its rows are left out)")
        return None


def pick(rows, **want):
    """The one row whose fields equal want (None if none)."""
    for r in rows or []:
        if all(r.get(k) == v for k, v in want.items()):
            return r
    return None


def ms(r):
    return r["median_ms"] if r else None


def ratio(a, b):
    return a / b if a is not None and b else None


def fmt(x, spec=".2f"):
    return "-" if x is None else format(x, spec)


def verdict(x, goal, le=True):
    if x is None:
        return "not measured"
    ok = x <= goal if le else x >= goal
    return ("met" if ok else "not met") + f" (goal {'<=' if le else '>='} {goal})"


def main(d):
    ag4, t4 = load(d, "ag-4x1024.json"), load(d, "torch-4x1024.json")
    later = load(d, "ag-later.json")
    ag8, t8 = load(d, "ag-8x4096.json"), load(d, "torch-8x4096.json")
    k2048 = load(d, "ag-splitk2048.json")
    batches = [64, 256, 1024, 4096]

    def step(rows, dev, mode, width, batch):
        return pick(rows, device=dev, kind="mlp_step", mode=mode, width=width, batch=batch)

    def tstep(rows, mode, width, batch):
        return pick(rows, kind="mlp_step", mode=mode, width=width, batch=batch)

    def vs_torch(title, ag, t, width, bs, spec):
        print(title + " / ".join(map(str, bs)))
        for dev, goal in (("webgpu", 1.0), ("ggml-vulkan", 1.2)):
            rs = [ratio(ms(step(ag, dev, "captured", width, b)), ms(tstep(t, "cuda_graph", width, b))) for b in bs]
            worst = max((x for x in rs if x is not None), default=None)
            times = " / ".join(fmt(ms(step(ag, dev, "captured", width, b)), spec) for b in bs)
            print(f"  {dev:<12} {' / '.join(fmt(x) for x in rs)}  ({times} ms)  {verdict(worst, goal)}")
        print(f"  {'torch graph':<12} " + " / ".join(fmt(ms(tstep(t, 'cuda_graph', width, b)), spec) for b in bs) + " ms")

    vs_torch("4x1024 MLP Adam step, captured / PyTorch CUDA graph (f32, TF32 off), by batch ", ag4, t4, 1024, batches, ".3f")
    vs_torch("8x4096 MLP step, captured / PyTorch CUDA graph, batch ", ag8, t8, 4096, [1024, 4096], ".2f")

    print("matmul f32, ag's speed / torch.matmul's (TF32 off), 2048 / 4096")
    for dev in ("webgpu", "ggml-vulkan"):
        rs, gf = [], []
        for n in (2048, 4096):
            a = pick(ag4, device=dev, kind="matmul", n=n)
            t = pick(t4, kind="matmul", n=n, dtype="f32")
            gf.append(fmt(a["gflops"] / 1000 if a else None, ".1f"))
            rs.append(ratio(a["gflops"] if a else None, t["gflops"] if t else None))
        worst = min((x for x in rs if x is not None), default=None)
        goal = f"  {verdict(worst, 0.9, le=False)}" if dev == "webgpu" else ""
        print(f"  {dev:<12} {' / '.join(fmt(x) for x in rs)}  ({' / '.join(gf)} TFLOP/s){goal}")
    tg = [pick(t4, kind="matmul", n=n, dtype="f32") for n in (2048, 4096)]
    print(f"  {'torch f32':<12} " + " / ".join(fmt(t["gflops"] / 1000 if t else None, ".1f") for t in tg) + " TFLOP/s")

    print("lazy / captured, by batch (4x1024: " + " / ".join(map(str, batches)) + "; 8x4096: 1024 / 4096)")
    for dev in ("webgpu", "ggml-vulkan"):
        r4 = [ratio(ms(step(ag4, dev, "lazy", 1024, b)), ms(step(ag4, dev, "captured", 1024, b))) for b in batches]
        r8 = [ratio(ms(step(ag8, dev, "lazy", 4096, b)), ms(step(ag8, dev, "captured", 4096, b))) for b in (1024, 4096)]
        worst = max((x for x in r4 + r8 if x is not None), default=None)
        print(f"  {dev:<12} {' / '.join(fmt(x) for x in r4)}; {' / '.join(fmt(x) for x in r8)}  "
              f"(the loss read at once each step)  {verdict(worst, 1.1)}")
    if later:
        rl = [ratio(ms(step(later, "webgpu", "lazy", 1024, b)), ms(step(ag4, "webgpu", "captured", 1024, b))) for b in batches]
        worst = max((x for x in rl if x is not None), default=None)
        print(f"  {'webgpu':<12} {' / '.join(fmt(x) for x in rl)}  (lazy waiting for each loss 2 steps later, "
              f"-later 2, against captured)  {verdict(worst, 1.1)}")

    print("cost growth from 4x1024 to 8x4096 at batch 1024 (32x the FLOPs), captured")
    tg = ratio(ms(tstep(t8, "cuda_graph", 4096, 1024)), ms(tstep(t4, "cuda_graph", 1024, 1024)))
    for dev in ("webgpu", "ggml-vulkan"):
        g = ratio(ms(step(ag8, dev, "captured", 4096, 1024)), ms(step(ag4, dev, "captured", 1024, 1024)))
        print(f"  {dev:<12} {fmt(g, '.1f')}x, torch {fmt(tg, '.1f')}x; ag's growth / torch's {fmt(ratio(g, tg))}  "
              f"{verdict(ratio(g, tg), 1.0)}")

    if k2048:
        print("ggml-vulkan 4x1024 captured, K split from k >= 512 (patch 0008) / from 2048 (ggml's own), by batch")
        rs = [ratio(ms(step(ag4, "ggml-vulkan", "captured", 1024, b)), ms(step(k2048, "ggml-vulkan", "captured", 1024, b)))
              for b in batches]
        times = " / ".join(fmt(ms(step(k2048, "ggml-vulkan", "captured", 1024, b)), ".3f") for b in batches)
        print(f"  {' / '.join(fmt(x) for x in rs)}  (2048: {times} ms)")


if __name__ == "__main__":
    if len(sys.argv) != 2 or not os.path.isdir(sys.argv[1]):
        sys.exit("usage: python3 bench/h200_table.py DIR (a bench/h200.sh run's output folder)")
    main(sys.argv[1])
