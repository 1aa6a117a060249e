#!/usr/bin/env python3
"""PyTorch peer of `ag bench`: the same 4x1024 MLP Adam/MSE step and square
matmuls, timed the same way (median of N after warm-up), as JSON on stdout.

Run it with Debian's python3-torch (CPU) as bench/side_by_side.sh does:
  env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE /usr/bin/python3 bench/torch_mlp.py
"""
import argparse, json, statistics, time

import torch


def timed(fn, reps, warm=2):
    for _ in range(warm):
        fn()
    ts = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        ts.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(ts), min(ts)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--matmul", default="256,512,1024")
    ap.add_argument("--batch", default="64,256")
    ap.add_argument("--width", type=int, default=1024)
    ap.add_argument("--depth", type=int, default=4)
    ap.add_argument("--reps", type=int, default=10)
    a = ap.parse_args()
    torch.manual_seed(1)
    out = {"peer": "pytorch", "version": torch.__version__, "threads": torch.get_num_threads(), "results": []}
    for n in [int(s) for s in a.matmul.split(",") if s]:
        x, y = torch.randn(n, n), torch.randn(n, n)
        med, mn = timed(lambda: torch.matmul(x, y), a.reps)
        out["results"].append({"kind": "matmul", "n": n, "median_ms": med, "min_ms": mn,
                               "gflops": 2 * n**3 / med / 1e6})
    w, d = a.width, a.depth
    for b in [int(s) for s in a.batch.split(",") if s]:
        layers = []
        for i in range(d):
            layers.append(torch.nn.Linear(w, w))
            if i + 1 < d:
                layers.append(torch.nn.ReLU())
        model = torch.nn.Sequential(*layers)
        opt = torch.optim.Adam(model.parameters(), lr=1e-3)
        x, t = torch.rand(b, w) * 2 - 1, torch.tanh(torch.randn(b, w))

        def step():
            opt.zero_grad(set_to_none=True)
            loss = torch.nn.functional.mse_loss(model(x), t)
            loss.backward()
            opt.step()
            return loss.item()

        med, mn = timed(step, a.reps)
        out["results"].append({"kind": "mlp_step", "width": w, "depth": d, "batch": b, "median_ms": med,
                               "min_ms": mn, "gflops": 6 * b * w * w * d / med / 1e6})
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
