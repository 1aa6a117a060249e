#!/usr/bin/env python3
"""PyTorch peer of `ag bench`: the same 4x1024 MLP Adam/MSE step and square
matmuls, timed the same way (median of N after warm-up), as JSON on stdout.

Run it with Debian's python3-torch (CPU) as bench/side_by_side.sh does:
  env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE /usr/bin/python3 bench/torch_mlp.py
"""
import argparse, contextlib, json, os

import torch

from peer import cuda_graph, device, every, timed


AMP = contextlib.nullcontext  # autocast with --amp


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--matmul", default="256,512,1024")
    ap.add_argument("--batch", default="64,256")
    ap.add_argument("--width", type=int, default=1024)
    ap.add_argument("--depth", type=int, default=4)
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--device", default="cpu", help="cpu or cuda")
    ap.add_argument("--threads", type=int, default=0,
                    help="CPU threads (default 0: torch's own choice; OpenBLAS adds its own pool)")
    ap.add_argument("--amp", default="", help="autocast dtype: f16 or bf16 (ag bench -precision); empty: f32")
    ap.add_argument("--cuda-graph", action="store_true", help="also time the step captured in a CUDA graph")
    ap.add_argument("--every", type=int, default=1,
                    help="read the loss every this many steps (a timing is that many steps, shared), as ag bench -every")
    ap.add_argument("--matmul-dtypes", default="f32",
                    help="the matmul rows' types: f32 (TF32 off), tf32, bf16, f16 (comma-separated)")
    a = ap.parse_args()
    if a.every < 1:
        ap.error(f"--every {a.every}: want >= 1")
    global AMP
    if a.amp:
        dt = {"f16": torch.float16, "bf16": torch.bfloat16}[a.amp]
        AMP = lambda: torch.autocast(a.device.split(":")[0], dtype=dt, cache_enabled=False)
    if a.threads > 0:
        torch.set_num_threads(a.threads)
    dev, sync = device(a.device)
    torch.manual_seed(1)
    out = {"peer": "pytorch", "version": torch.__version__, "device": str(dev),
           "threads": torch.get_num_threads(), "results": []}
    dtypes = {"f32": torch.float32, "tf32": torch.float32, "bf16": torch.bfloat16, "f16": torch.float16}
    for n in [int(s) for s in a.matmul.split(",") if s]:
        for name in [s for s in a.matmul_dtypes.split(",") if s]:
            if name not in dtypes:
                ap.error(f"--matmul-dtypes: {name!r} is not one of f32, tf32, bf16, f16")
            # TF32 only for its own rows: everything else stays f32 as peer.device set it
            torch.backends.cuda.matmul.allow_tf32 = name == "tf32"
            x = torch.randn(n, n, device=dev).to(dtypes[name])
            y = torch.randn(n, n, device=dev).to(dtypes[name])
            med, mn = timed(lambda: torch.matmul(x, y), a.reps, sync)
            out["results"].append({"kind": "matmul", "n": n, "dtype": name, "median_ms": med, "min_ms": mn,
                                   "gflops": 2 * n**3 / med / 1e6})
        torch.backends.cuda.matmul.allow_tf32 = False
    w, d = a.width, a.depth
    for b in [int(s) for s in a.batch.split(",") if s]:
        layers = []
        for i in range(d):
            layers.append(torch.nn.Linear(w, w))
            if i + 1 < d:
                layers.append(torch.nn.ReLU())
        model = torch.nn.Sequential(*layers).to(dev)
        opt = torch.optim.Adam(model.parameters(), lr=1e-3, capturable=a.cuda_graph)
        x, t = torch.rand(b, w, device=dev) * 2 - 1, torch.tanh(torch.randn(b, w, device=dev))

        def unread():
            opt.zero_grad(set_to_none=True)
            with AMP():
                loss = torch.nn.functional.mse_loss(model(x), t)
            loss.backward()
            opt.step()
            return loss

        def step():
            return unread().item()

        k = a.every
        med, mn = (v / k for v in timed(every(k, unread, step), a.reps, sync))
        out["results"].append({"kind": "mlp_step", "mode": "eager", "width": w, "depth": d, "batch": b, "every": k,
                               "median_ms": med, "min_ms": mn, "gflops": 6 * b * w * w * d / med / 1e6})
        if a.cuda_graph and dev.type == "cuda":
            def body():
                with AMP():
                    gl = torch.nn.functional.mse_loss(model(x), t)
                gl.backward()
                opt.step()
                return gl

            replay = cuda_graph(step, body, lambda: opt.zero_grad(set_to_none=True))
            med, mn = (v / k for v in timed(every(k, replay.unread, replay), a.reps, sync))
            out["results"].append({"kind": "mlp_step", "mode": "cuda_graph", "width": w, "depth": d, "batch": b, "every": k,
                                   "median_ms": med, "min_ms": mn, "gflops": 6 * b * w * w * d / med / 1e6})
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
