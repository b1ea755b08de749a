#!/usr/bin/env python3
"""PyTorch's float32 errors (ulp of the true result, normal results) on the same points
and domains as tests/reliability/accuracy_test.cpp, for docs/ops.md. The true result is
PyTorch's own float64 evaluation. Usage: /usr/bin/python3 tests/reliability/torch_accuracy.py [stride]"""
import math
import sys

import torch

torch.set_num_threads(2)
stride = int(sys.argv[1]) if len(sys.argv) > 1 else 8191
bits = torch.arange(0, 2**32, stride, dtype=torch.int64)
bits = torch.where(bits >= 2**31, bits - 2**32, bits).to(torch.int32)
sweep = bits.view(torch.float32)
sweep = sweep[torch.isfinite(sweep)]


def points(lo, hi):
    x = sweep[(sweep >= lo) & (sweep <= hi)]
    a, z = max(lo, -100.0), min(hi, 100.0)
    lin = torch.tensor([a + (z - a) * i / 100000.0 for i in range(100001)], dtype=torch.float64).float()
    return torch.cat([x, lin])


def ulp(r):
    a = r.abs()
    e = torch.floor(torch.log2(a.clamp(min=2.0**-126)))
    return torch.where(a < 2.0**-126, torch.full_like(a, 2.0**-149), torch.pow(2.0, e - 23))


F = torch.nn.functional
cases = [
    ("exp", torch.exp, -1e38, 1e38), ("exp2", torch.exp2, -1e38, 1e38), ("log", torch.log, 0, 1e39),
    ("log2", torch.log2, 0, 1e39), ("sqrt", torch.sqrt, 0, 1e39), ("rsqrt", torch.rsqrt, 0, 1e39),
    ("recip", torch.reciprocal, -1e39, 1e39), ("sin", torch.sin, -8192, 8192), ("cos", torch.cos, -8192, 8192),
    ("tanh", torch.tanh, -1e39, 1e39), ("sigmoid", torch.sigmoid, -1e39, 1e39), ("silu", F.silu, -87, 1e39),
    ("gelu", lambda t: F.gelu(t, approximate="tanh"), -1, 1e39), ("gelu_erf", F.gelu, -3, 1e39),
    ("gelu_erf", F.gelu, -1e39, 1e39), ("erf", torch.erf, -1e39, 1e39)]
for name, f, lo, hi in cases:
    x = points(lo, hi)
    y = f(x).double()
    r = f(x.double())
    ok = torch.isfinite(r) & (r.abs() <= 3.4028234663852886e38) & (r.abs() >= 2.0**-126)
    e = ((y - r).abs() / ulp(r))[ok]
    i = torch.argmax(e)
    print(f"torch: {name:9s} [{lo:g}, {hi:g}] max {e[i].item():.2f} ulp at x = {x[ok][i].item():.9g} ({x.numel()} points)")
