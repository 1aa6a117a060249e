#!/usr/bin/python3
"""Writes the PyTorch fixtures of nn's safetensors interop tests
(TestTorchInterop*): two small PyTorch models' state_dicts, and for each
an input and PyTorch's output, as safetensors files.

Run from this folder with Debian's python3-torch (1.13):
    /usr/bin/python3 make_fixture.py
The Python safetensors package is not needed: the format is written here
by hand from the tensors' bytes (8-byte little-endian header length, JSON
header, raw little-endian data), as its specification says, so the files
are independent of ag's writer.
"""
import json
import struct

import torch

DTYPES = {torch.float32: "F32", torch.float16: "F16", torch.bfloat16: "BF16", torch.int64: "I64"}


def raw(t):
    t = t.detach().contiguous().cpu()
    if t.dtype in (torch.float16, torch.bfloat16):
        t = t.view(torch.int16)  # numpy has no bfloat16
    return t.numpy().tobytes()  # little-endian on the machines this runs on


def save(path, tensors, metadata=None):
    header, data = {}, b""
    if metadata:
        header["__metadata__"] = metadata
    for name, t in tensors.items():
        b = raw(t)
        header[name] = {"dtype": DTYPES[t.dtype], "shape": list(t.shape),
                        "data_offsets": [len(data), len(data) + len(b)]}
        data += b
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + data)


def mlp():
    torch.manual_seed(1)
    m = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 3), torch.nn.LayerNorm(3))
    with torch.no_grad():  # a LayerNorm that is not the identity's
        m[3].weight.uniform_(0.5, 1.5)
        m[3].bias.uniform_(-0.5, 0.5)
    m.eval()
    x = torch.randn(5, 4)
    with torch.no_grad():
        y = m(x)
    sd = m.state_dict()
    meta = {"format": "pt", "torch": torch.__version__}
    save("torch_mlp.safetensors", sd, meta)
    save("torch_mlp_f16.safetensors", {k: v.half() for k, v in sd.items()}, meta)
    save("torch_mlp_bf16.safetensors", {k: v.bfloat16() for k, v in sd.items()}, meta)
    save("torch_mlp_io.safetensors", {"input": x, "output": y})


def convnet():
    torch.manual_seed(2)
    m = torch.nn.Sequential(
        torch.nn.Conv2d(2, 3, 3, padding=1),
        torch.nn.BatchNorm2d(3),
        torch.nn.ReLU(),
        torch.nn.Flatten(),
        torch.nn.Linear(3 * 4 * 4, 5),
    )
    with torch.no_grad():  # running statistics of a network that trained
        m[1].weight.uniform_(0.5, 1.5)
        m[1].bias.uniform_(-0.5, 0.5)
        m[1].running_mean.uniform_(-0.3, 0.3)
        m[1].running_var.uniform_(0.5, 2.0)
        m[1].num_batches_tracked.fill_(7)
    m.eval()
    x = torch.randn(2, 2, 4, 4)
    with torch.no_grad():
        y = m(x)
    save("torch_conv.safetensors", m.state_dict(), {"format": "pt"})
    save("torch_conv_io.safetensors", {"input": x, "output": y})


if __name__ == "__main__":
    mlp()
    convnet()
