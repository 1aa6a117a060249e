#!/usr/bin/env python3
"""PyTorch peer of `ag bench -gpt`: the same character-level GPT (models.GPT:
token + position embeddings, pre-norm blocks with causal multi-head
attention and a GELU (tanh) MLP of 4x width, final LayerNorm, linear head),
the same step (AdamW lr 1e-3 wd 0.01, gradient norm clipped to 1, dropout
0.1 or --dropout) on batches of the same shapes, timed the same way (median of N after
warm-up), as JSON on stdout.

  python3 bench/torch_gpt.py --gpt 4x256 --ctx 128 --batch 32 [--device cuda --cuda-graph]

--gpt2 makes it GPT-2 (models.GPT2, examples/gpt2): the vocabulary of 50257
tokens, the head tied to the token embedding (no bias), q, k and v as one
Linear of 3x width (GPT-2's c_attn) and GPT-2's AdamW (lr 6e-4, betas 0.9
and 0.95, weight decay 0.1); e.g. GPT-2 124M at ctx 1024, issue 41's peer:

  python3 bench/torch_gpt.py --gpt2 --gpt 12x768 --ctx 1024 --batch 4 --device cuda --cuda-graph
"""
import argparse, contextlib, json

import torch
import torch.nn as nn
import torch.nn.functional as F

from peer import cuda_graph, device, timed

AMP = contextlib.nullcontext  # autocast with --amp
VOCAB = 50  # the bytes of models.KeeperText; --vocab, --gpt2


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
    def __init__(self, d, heads, p, fused=False):
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.o = nn.Linear(d, d)
        if fused:  # GPT-2's c_attn
            self.qkv = nn.Linear(d, 3 * d)
        else:
            self.q, self.k, self.v = (nn.Linear(d, d) for _ in range(3))
        self.ff1, self.ff2 = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)
        self.heads, self.p = heads, p

    def forward(self, x):
        b, t, d = x.shape
        h = self.ln1(x)
        split = lambda y: y.view(b, t, self.heads, d // self.heads).transpose(1, 2)
        q, k, v = self.qkv(h).split(d, dim=-1) if hasattr(self, "qkv") else (self.q(h), self.k(h), self.v(h))
        a = attention(split(q), split(k), split(v), self.p if self.training else 0)
        x = x + F.dropout(self.o(a.transpose(1, 2).reshape(b, t, d)), self.p, self.training)
        f = self.ff2(F.gelu(self.ff1(self.ln2(x)), approximate="tanh"))
        return x + F.dropout(f, self.p, self.training)


class GPT(nn.Module):
    def __init__(self, layers, d, ctx, p, gpt2=False):
        super().__init__()
        self.tok, self.pos = nn.Embedding(VOCAB, d), nn.Embedding(ctx, d)
        self.blocks = nn.ModuleList(Block(d, max(1, d // 64), p, gpt2) for _ in range(layers))
        self.ln = nn.LayerNorm(d)
        # GPT-2's lm_head is the token embedding itself, without a bias
        self.head = None if gpt2 else nn.Linear(d, VOCAB)
        self.p = p

    def forward(self, idx):
        t = idx.shape[1]
        x = F.dropout(self.tok(idx) + self.pos.weight[:t], self.p, self.training)
        for b in self.blocks:
            x = b(x)
        x = self.ln(x)
        return x @ self.tok.weight.t() if self.head is None else self.head(x)


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
    ap.add_argument("--vocab", type=int, default=0, help="vocabulary (0: 50, or 50257 with --gpt2)")
    ap.add_argument("--gpt2", action="store_true", help="GPT-2: vocabulary 50257, tied head, fused qkv, GPT-2's AdamW")
    a = ap.parse_args()
    global AMP, VOCAB
    VOCAB = a.vocab or (50257 if a.gpt2 else VOCAB)
    if a.amp:
        dt = {"f16": torch.float16, "bf16": torch.bfloat16}[a.amp]
        AMP = lambda: torch.autocast(a.device.split(":")[0], dtype=dt, cache_enabled=False)
    dev, sync = device(a.device)
    torch.manual_seed(1)
    out = {"peer": "pytorch", "version": torch.__version__, "device": str(dev), "results": []}
    for spec in a.gpt.split(","):
        layers, d = (int(s) for s in spec.split("x"))
        for b in [int(s) for s in a.batch.split(",") if s]:
            model = GPT(layers, d, a.ctx, a.dropout, a.gpt2).to(dev)
            if a.gpt2:
                opt = torch.optim.AdamW(model.parameters(), lr=6e-4, betas=(0.9, 0.95), weight_decay=0.1, capturable=a.cuda_graph)
            else:
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
            params = sum(q.numel() for q in model.parameters())
            res = {"kind": "gpt2_step" if a.gpt2 else "gpt_step", "width": d, "depth": layers, "batch": b, "context": a.ctx, "vocab": VOCAB,
                   "params": params, "dropout": a.dropout, "precision": a.amp or "f32"}
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
