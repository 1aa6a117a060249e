#!/usr/bin/python3
"""Writes the PyTorch fixtures of models' GPT-2 interop test
(TestGPT2TorchInterop): a small GPT-2-shaped model written here in plain
PyTorch with the module names and layouts of Hugging Face's
GPT2LMHeadModel (Conv1D weights [in, out], q, k, v packed in c_attn, the
head tied to wte, GELU's tanh form, pre-norm), randomly initialised (biases
and LayerNorms too), its state dict, and an input with its logits.

Run from this folder with Debian's python3-torch (1.13; `bash
scripts/deps.sh peers` installs it), no transformers library:
    /usr/bin/python3 make_gpt2_fixture.py
It writes
  torch_gpt2.safetensors: the state dict as GPT2LMHeadModel names it
    ("transformer." prefix, lm_head.weight, each block's causal-mask buffer
    attn.bias as older transformers saved it);
  torch_gpt2_bare.safetensors: the same weights as GPT2Model names them
    (no prefix, no head, no masks);
  torch_gpt2_io.safetensors: "input" [2, 11] token ids (I64) and "logits"
    [2, 11, 37].
The safetensors format is written by hand as in nn/testdata/make_fixture.py.
"""
import json
import math
import struct

import torch
import torch.nn.functional as F

VOCAB, CTX, DIM, HEADS, LAYERS = 37, 16, 24, 3, 2
DTYPES = {torch.float32: "F32", torch.int64: "I64"}


def save(path, tensors):
    header, data = {"__metadata__": {"format": "pt"}}, b""
    for name, t in tensors.items():
        b = t.detach().contiguous().numpy().tobytes()
        header[name] = {"dtype": DTYPES[t.dtype], "shape": list(t.shape),
                        "data_offsets": [len(data), len(data) + len(b)]}
        data += b
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + data)


class Conv1D(torch.nn.Module):
    """GPT-2's linear layer: x @ weight + bias, weight [in, out]."""

    def __init__(self, n_in, n_out):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.randn(n_in, n_out) * 0.2)
        self.bias = torch.nn.Parameter(torch.randn(n_out) * 0.1)

    def forward(self, x):
        return x @ self.weight + self.bias


def layer_norm():
    ln = torch.nn.LayerNorm(DIM, eps=1e-5)
    with torch.no_grad():
        ln.weight.uniform_(0.5, 1.5)
        ln.bias.uniform_(-0.3, 0.3)
    return ln


class Attention(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.c_attn = Conv1D(DIM, 3 * DIM)
        self.c_proj = Conv1D(DIM, DIM)

    def forward(self, x):
        B, T, C = x.shape
        q, k, v = self.c_attn(x).split(C, dim=2)
        q, k, v = (t.view(B, T, HEADS, C // HEADS).transpose(1, 2) for t in (q, k, v))
        w = q @ k.transpose(-2, -1) / math.sqrt(C // HEADS)
        w = w.masked_fill(torch.ones(T, T).tril() == 0, float("-inf")).softmax(-1)
        return self.c_proj((w @ v).transpose(1, 2).reshape(B, T, C))


class MLP(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.c_fc = Conv1D(DIM, 4 * DIM)
        self.c_proj = Conv1D(4 * DIM, DIM)

    def forward(self, x):
        return self.c_proj(F.gelu(self.c_fc(x), approximate="tanh"))


class Block(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.ln_1, self.attn, self.ln_2, self.mlp = layer_norm(), Attention(), layer_norm(), MLP()

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class GPT2(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.wte = torch.nn.Embedding(VOCAB, DIM)
        self.wpe = torch.nn.Embedding(CTX, DIM)
        self.h = torch.nn.ModuleList(Block() for _ in range(LAYERS))
        self.ln_f = layer_norm()

    def forward(self, idx):
        x = self.wte(idx) + self.wpe(torch.arange(idx.shape[1]))
        for b in self.h:
            x = b(x)
        return self.ln_f(x) @ self.wte.weight.T  # the tied head


def main():
    torch.manual_seed(3)
    m = GPT2().eval()
    idx = torch.randint(0, VOCAB, (2, 11))
    with torch.no_grad():
        logits = m(idx)
    sd = m.state_dict()
    hf = {"transformer." + k: v for k, v in sd.items()}
    for i in range(LAYERS):
        hf[f"transformer.h.{i}.attn.bias"] = torch.ones(CTX, CTX).tril().view(1, 1, CTX, CTX)
    hf["lm_head.weight"] = sd["wte.weight"]
    save("torch_gpt2.safetensors", hf)
    save("torch_gpt2_bare.safetensors", sd)
    save("torch_gpt2_io.safetensors", {"input": idx, "logits": logits})


if __name__ == "__main__":
    main()
