#!/usr/bin/env python3
"""PyTorch peer of `ag bench -convnet SIDE`: the same convnet (conv 3x3 32,
batch norm, ReLU, max pool 2; conv 3x3 64, batch norm, ReLU, max pool 2;
linear 128, ReLU; linear 10), Adam lr 1e-3 on cross-entropy, on a fixed
batch of random single-channel images, timed the same way (median of N
after warm-up), as JSON on stdout.

  python3 bench/torch_convnet.py --side 28 --batch 64 [--device cuda --cuda-graph]
"""
import argparse, json

import torch
import torch.nn as nn
import torch.nn.functional as F

from peer import cuda_graph, device, timed



def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--side", default="28")
    ap.add_argument("--batch", default="64")
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--cuda-graph", action="store_true")
    a = ap.parse_args()
    dev, sync = device(a.device)
    torch.manual_seed(1)
    out = {"peer": "pytorch", "version": torch.__version__, "device": str(dev), "results": []}
    for s in [int(v) for v in a.side.split(",") if v]:
        for b in [int(v) for v in a.batch.split(",") if v]:
            q = s // 4
            model = nn.Sequential(
                nn.Conv2d(1, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(), nn.MaxPool2d(2),
                nn.Conv2d(32, 64, 3, padding=1), nn.BatchNorm2d(64), nn.ReLU(), nn.MaxPool2d(2),
                nn.Flatten(), nn.Linear(64 * q * q, 128), nn.ReLU(), nn.Linear(128, 10)).to(dev)
            opt = torch.optim.Adam(model.parameters(), lr=1e-3, capturable=a.cuda_graph)
            x = torch.randn(b, 1, s, s, device=dev)
            y = torch.randint(0, 10, (b,), device=dev)
            flops = 3 * (2 * b * s * s * 9 * 32 + 2 * b * (s // 2) ** 2 * 9 * 32 * 64 + 2 * b * 64 * q * q * 128 + 2 * b * 128 * 10)

            def step():
                opt.zero_grad(set_to_none=True)
                loss = F.cross_entropy(model(x), y)
                loss.backward()
                opt.step()
                return loss.item()

            res = {"kind": "convnet_step", "width": s, "batch": b}
            med, mn = timed(step, a.reps, sync)
            out["results"].append(dict(res, mode="eager", median_ms=med, min_ms=mn, gflops=flops / med / 1e6))
            if a.cuda_graph and dev.type == "cuda":
                def body():
                    gl = F.cross_entropy(model(x), y)
                    gl.backward()
                    opt.step()
                    return gl

                replay = cuda_graph(step, body, lambda: opt.zero_grad(set_to_none=True))
                med, mn = timed(replay, a.reps, sync)
                out["results"].append(dict(res, mode="cuda_graph", median_ms=med, min_ms=mn, gflops=flops / med / 1e6))
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
