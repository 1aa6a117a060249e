#!/usr/bin/env python3
"""PyTorch peer of `ag bench -gpt`: the same character-level GPT (models.GPT:
token + position embeddings, pre-norm blocks with causal multi-head
attention and a GELU (tanh) MLP of 4x width, final LayerNorm, linear head),
the same step (AdamW lr 1e-3 wd 0.01, gradient norm clipped to 1, dropout
0.1 or --dropout) on batches of the same shapes, timed the same way (median of N after
warm-up), as JSON on stdout.

  python3 bench/torch_gpt.py --gpt 4x256 --ctx 128 --batch 32 [--device cuda --cuda-graph]
"""
import argparse, contextlib, json

import torch
import torch.nn as nn
import torch.nn.functional as F

from peer import cuda_graph, device, timed

AMP = contextlib.nullcontext  # autocast with --amp
VOCAB = 50  # the bytes of models.KeeperText


def attention(q, k, v, p):
    """Causal scaled dot-product attention: PyTorch's own where it has one
    (2.0+), else the same math (Debian's 1.13 on the CPU)."""
    if hasattr(F, "scaled_dot_product_attention"):
        return F.scaled_dot_product_attention(q, k, v, is_causal=True, dropout_p=p)
    t = q.shape[-2]
    s = q @ k.transpose(-2, -1) / q.shape[-1] ** 0.5
    s = s.masked_fill(torch.ones(t, t, dtype=torch.bool, device=q.device).triu(1), float("-inf"))
    return F.dropout(s.softmax(-1), p) @ v


class Block(nn.Module):
    def __init__(self, d, heads, p):
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.q, self.k, self.v, self.o = (nn.Linear(d, d) for _ in range(4))
        self.ff1, self.ff2 = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)
        self.heads, self.p = heads, p

    def forward(self, x):
        b, t, d = x.shape
        h = self.ln1(x)
        split = lambda y: y.view(b, t, self.heads, d // self.heads).transpose(1, 2)
        a = attention(split(self.q(h)), split(self.k(h)), split(self.v(h)), self.p if self.training else 0)
        x = x + F.dropout(self.o(a.transpose(1, 2).reshape(b, t, d)), self.p, self.training)
        f = self.ff2(F.gelu(self.ff1(self.ln2(x)), approximate="tanh"))
        return x + F.dropout(f, self.p, self.training)


class GPT(nn.Module):
    def __init__(self, layers, d, ctx, p):
        super().__init__()
        self.tok, self.pos = nn.Embedding(VOCAB, d), nn.Embedding(ctx, d)
        self.blocks = nn.ModuleList(Block(d, max(1, d // 64), p) for _ in range(layers))
        self.ln, self.head = nn.LayerNorm(d), nn.Linear(d, VOCAB)
        self.p = p

    def forward(self, idx):
        t = idx.shape[1]
        x = F.dropout(self.tok(idx) + self.pos.weight[:t], self.p, self.training)
        for b in self.blocks:
            x = b(x)
        return self.head(self.ln(x))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--gpt", default="2x128", help="LAYERSxWIDTH, comma-separated")
    ap.add_argument("--ctx", type=int, default=128)
    ap.add_argument("--batch", default="32")
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--amp", default="", help="autocast dtype: f16 or bf16 (ag bench -precision); empty: f32")
    ap.add_argument("--dropout", type=float, default=0.1, help="dropout probability (ag bench -gpt-dropout)")
    ap.add_argument("--cuda-graph", action="store_true")
    a = ap.parse_args()
    global AMP
    if a.amp:
        dt = {"f16": torch.float16, "bf16": torch.bfloat16}[a.amp]
        AMP = lambda: torch.autocast(a.device.split(":")[0], dtype=dt, cache_enabled=False)
    dev, sync = device(a.device)
    torch.manual_seed(1)
    out = {"peer": "pytorch", "version": torch.__version__, "device": str(dev), "results": []}
    for spec in a.gpt.split(","):
        layers, d = (int(s) for s in spec.split("x"))
        for b in [int(s) for s in a.batch.split(",") if s]:
            model = GPT(layers, d, a.ctx, a.dropout).to(dev)
            opt = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.01, capturable=a.cuda_graph)
            x = torch.randint(0, VOCAB, (b, a.ctx), device=dev)
            y = torch.randint(0, VOCAB, (b, a.ctx), device=dev)
            t, v = a.ctx, VOCAB
            flops = 3 * (layers * (8 * b * t * d * d + 16 * b * t * d * d + 4 * b * t * t * d) + 2 * b * t * d * v)

            def loss_fn():
                with AMP():
                    return F.cross_entropy(model(x).view(-1, VOCAB), y.view(-1))

            def step():
                opt.zero_grad(set_to_none=True)
                loss = loss_fn()
                loss.backward()
                torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
                opt.step()
                return loss.item()

            med, mn = timed(step, a.reps, sync)
            res = {"kind": "gpt_step", "width": d, "depth": layers, "batch": b, "context": a.ctx, "dropout": a.dropout, "precision": a.amp or "f32"}
            out["results"].append(dict(res, mode="eager", median_ms=med, min_ms=mn, gflops=flops / med / 1e6))
            if a.cuda_graph and dev.type == "cuda":
                def body():
                    gl = loss_fn()
                    gl.backward()
                    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
                    opt.step()
                    return gl

                replay = cuda_graph(step, body, lambda: opt.zero_grad(set_to_none=True))
                med, mn = timed(replay, a.reps, sync)
                out["results"].append(dict(res, mode="cuda_graph", median_ms=med, min_ms=mn, gflops=flops / med / 1e6))
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
