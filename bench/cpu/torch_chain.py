#!/usr/bin/python3
"""PyTorch eager side of bench/cpu/elementwise_bench.cpp: the same 10-op elementwise
chain over 16M floats (and a tanh-GELU), 2 threads. Prints one `name median_ms=<v>` line
per workload; the C++ benchmark parses them and prints the ratios.
Run with Debian's interpreter: /usr/bin/python3 bench/cpu/torch_chain.py"""
import sys

import torch
from torch_timing import median_ms

torch.set_num_threads(2)
N = 16 * 1024 * 1024
REPS = int(sys.argv[1]) if len(sys.argv) > 1 else 7

gen = torch.Generator().manual_seed(0)
x = torch.rand(N, generator=gen) * 4 - 2
y = torch.rand(N, generator=gen) * 4 - 2


def chain(x, y):
    # sin, exp, mul, tanh, sigmoid, sub, relu, mul, add, mul: 10 kernels in eager mode
    a = torch.sin(x)
    b = torch.exp(a)
    c = b * y
    d = torch.tanh(c)
    e = torch.sigmoid(d)
    f = torch.relu(e - 0.5)
    g = f * 2.0
    h = g + x
    return h * y


def gelu(x):
    return torch.nn.functional.gelu(x, approximate="tanh")


with torch.no_grad():
    print(f"torch {torch.__version__} threads={torch.get_num_threads()}")
    print(f"chain median_ms={median_ms(chain, x, y, reps=REPS):.3f}")
    print(f"gelu median_ms={median_ms(gelu, x, reps=REPS):.3f}")
