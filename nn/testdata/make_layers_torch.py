#!/usr/bin/python3
"""Writes torch_layers.safetensors, the PyTorch fixture of nn's
TestTorchLayers: for each case of GroupNorm, InstanceNorm1d/2d,
ConvTranspose1d/2d and Upsample, its input, parameters and PyTorch's
output, with the cases' settings as JSON in the metadata ("cases").

Run from this folder with Debian's python3-torch (1.13):
    /usr/bin/python3 make_layers_torch.py
"""
import json

import torch

from make_fixture import save

torch.manual_seed(42)
tensors, cases = {}, []


def add(name, kind, cfg, module, x):
    y = module(x)
    tensors[name + ".x"] = x
    for k, v in module.state_dict().items():
        if k in ("weight", "bias"):
            tensors[name + "." + k] = v
    tensors[name + ".y"] = y
    cases.append(dict(name=name, kind=kind, **cfg))


def affine(m):
    with torch.no_grad():
        if getattr(m, "weight", None) is not None:
            m.weight.uniform_(-1.5, 1.5)
        if getattr(m, "bias", None) is not None:
            m.bias.uniform_(-1, 1)
    return m


for i, (g, c, shape, aff) in enumerate([(2, 6, (2, 6, 3, 4), True), (3, 6, (2, 6, 5), False), (1, 4, (3, 4, 2, 2), True), (4, 4, (2, 4, 3), True)]):
    x = torch.randn(*shape) * 3 + 1
    add("groupnorm%d" % i, "groupnorm", dict(groups=g, c=c, affine=aff), affine(torch.nn.GroupNorm(g, c, eps=1e-5, affine=aff)), x)

for i, (d, c, shape, aff) in enumerate([(1, 3, (2, 3, 7), True), (2, 3, (2, 3, 4, 5), False), (2, 2, (1, 2, 3, 3), True)]):
    m = (torch.nn.InstanceNorm1d if d == 1 else torch.nn.InstanceNorm2d)(c, eps=1e-5, affine=aff)
    add("instancenorm%d" % i, "instancenorm%dd" % d, dict(c=c, affine=aff), affine(m), torch.randn(*shape) * 2 - 1)

# ConvTranspose2d: in, out, kernel, stride, padding, output_padding, dilation, bias, input HxW
for i, (ci, co, k, s, p, op, d, b, hw) in enumerate([
    (3, 2, (3, 3), (1, 1), (0, 0), (0, 0), (1, 1), True, (4, 5)),
    (2, 3, (3, 3), (2, 2), (1, 1), (1, 1), (1, 1), True, (3, 4)),
    (2, 2, (3, 2), (2, 3), (1, 0), (0, 2), (1, 1), False, (4, 3)),
    (1, 2, (2, 3), (1, 1), (1, 1), (1, 2), (2, 3), True, (3, 3)),  # output padding >= stride (< dilation)
    (3, 4, (3, 3), (2, 2), (2, 2), (1, 1), (2, 2), True, (4, 4)),
    (2, 2, (1, 1), (3, 2), (0, 0), (2, 1), (1, 1), True, (2, 3)),  # 1x1, strided: gaps of bias only
]):
    m = torch.nn.ConvTranspose2d(ci, co, k, stride=s, padding=p, output_padding=op, dilation=d, bias=b)
    add("convtranspose2d_%d" % i, "convtranspose2d", dict(cin=ci, cout=co, kernel=k, stride=s, padding=p, output_padding=op, dilation=d, bias=b),
        m, torch.randn(2, ci, *hw))

for i, (ci, co, k, s, p, op, d, b, l) in enumerate([
    (2, 3, 3, 2, 1, 1, 1, True, 5),
    (3, 2, 4, 3, 0, 2, 2, True, 4),
    (1, 2, 3, 1, 1, 2, 3, False, 6),  # output padding >= stride (< dilation)
]):
    m = torch.nn.ConvTranspose1d(ci, co, k, stride=s, padding=p, output_padding=op, dilation=d, bias=b)
    add("convtranspose1d_%d" % i, "convtranspose1d", dict(cin=ci, cout=co, kernel=k, stride=s, padding=p, output_padding=op, dilation=d, bias=b),
        m, torch.randn(2, ci, l))

# Upsample: mode, align_corners, scale or size, input HxW
for i, (mode, ac, scale, size, hw) in enumerate([
    ("nearest", None, 2.0, None, (3, 4)),
    ("nearest", None, 1.5, None, (4, 5)),
    ("nearest", None, 3.0, None, (2, 3)),
    ("nearest", None, None, (5, 7), (3, 4)),
    ("nearest", None, None, (2, 3), (4, 5)),
    ("bilinear", False, 2.0, None, (3, 4)),
    ("bilinear", True, 2.0, None, (3, 4)),
    ("bilinear", False, 1.5, None, (4, 5)),
    ("bilinear", False, None, (5, 7), (3, 4)),
    ("bilinear", True, None, (7, 3), (3, 4)),
    ("bilinear", False, None, (2, 3), (4, 5)),
    ("bilinear", True, None, (1, 4), (3, 2)),
]):
    m = torch.nn.Upsample(size=size, scale_factor=scale, mode=mode, align_corners=ac)
    add("upsample%d" % i, "upsample", dict(mode=mode, align_corners=bool(ac), scale=scale or 0, size=size or [0, 0]),
        m, torch.randn(2, 3, *hw))

# A model of the new layers, its state_dict saved with PyTorch's keys
# (loaded through nn.PyTorchKeys) and its output.
seq = torch.nn.Sequential(
    torch.nn.ConvTranspose2d(2, 3, 3, stride=2, padding=1, output_padding=1),
    affine(torch.nn.GroupNorm(3, 3)),
    torch.nn.Upsample(scale_factor=2, mode="bilinear"),
    affine(torch.nn.InstanceNorm2d(3, affine=True)),
    torch.nn.ConvTranspose2d(3, 1, 2, bias=False),
)
x = torch.randn(2, 2, 3, 3)
tensors["seq.x"] = x
tensors["seq.y"] = seq(x)
save("torch_layers_seq.safetensors", seq.state_dict(), {"format": "pt"})

save("torch_layers.safetensors", tensors, {"cases": json.dumps(cases)})
