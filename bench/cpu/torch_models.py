#!/usr/bin/python3
"""PyTorch eager side of bench/cpu/model_bench.cpp: the same models (bench/cpu/model_models.hpp)
with the same shapes, f32, 2 threads. Prints one `name median_ms=<v>` line per workload; the
C++ benchmark parses them and prints the ratios. Run with Debian's interpreter:
    /usr/bin/python3 bench/cpu/torch_models.py [reps]
Workloads: decode (one Llama-style decoder step, d 2048, 16 heads, 4 KV heads, FFN 5632,
512 past tokens), prefill (128 tokens), mlp_b1 / mlp_b32 (1024 -> 4096 -> 4096 -> 1024)."""
import sys

import torch
import torch.nn.functional as F
from torch_timing import median_ms

torch.set_num_threads(2)
torch.set_grad_enabled(False)
REPS = int(sys.argv[1]) if len(sys.argv) > 1 else 15
ONLY = sys.argv[2].split(",") if len(sys.argv) > 2 else None

D, H, KV, FFN = 2048, 16, 4, 5632
HD = D // H
G = H // KV
gen = torch.Generator().manual_seed(0)


def rnd(*shape):
    return (torch.rand(*shape, generator=gen) * 2 - 1) * 0.05


def rms_norm(x, w, eps=1e-5):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * w


def rope(x, pos, theta=10000.0):
    # rotate-half form, x [heads, S, hd], pos [S]
    half = x.shape[-1] // 2
    inv = theta ** (-torch.arange(half, dtype=torch.float32) * 2 / x.shape[-1])
    ang = pos.to(torch.float32)[:, None] * inv[None, :]
    cos = torch.cat([ang.cos(), ang.cos()], -1)
    sin = torch.cat([ang.sin(), ang.sin()], -1)
    x1, x2 = x[..., :half], x[..., half:]
    return x * cos + torch.cat([-x2, x1], -1) * sin


W = dict(attn_norm=rnd(D) + 1, wq=rnd(D, D), wk=rnd(KV * HD, D), wv=rnd(KV * HD, D), wo=rnd(D, D),
         ffn_norm=rnd(D) + 1, w_gate=rnd(FFN, D), w_up=rnd(FFN, D), w_down=rnd(D, FFN))


def ffn(x2):
    h2 = rms_norm(x2, W["ffn_norm"])
    return x2 + F.linear(F.silu(F.linear(h2, W["w_gate"])) * F.linear(h2, W["w_up"]), W["w_down"])


def attention(q, k, v, causal):
    k = k.repeat_interleave(G, 0)
    v = v.repeat_interleave(G, 0)
    s = q @ k.transpose(1, 2) / HD ** 0.5
    if causal:
        n = s.shape[-1]
        s = s.masked_fill(~torch.ones(n, n, dtype=torch.bool).tril(), float("-inf"))
    return torch.softmax(s, -1) @ v


def decode(x, pos, kc, vc):
    h = rms_norm(x, W["attn_norm"])
    q = F.linear(h, W["wq"]).view(1, H, HD).transpose(0, 1)
    k = F.linear(h, W["wk"]).view(1, KV, HD).transpose(0, 1)
    v = F.linear(h, W["wv"]).view(1, KV, HD).transpose(0, 1)
    q, k = rope(q, pos), rope(k, pos)
    a = attention(q, torch.cat([kc, k], 1), torch.cat([vc, v], 1), False)
    x2 = x + F.linear(a.transpose(0, 1).reshape(1, D), W["wo"])
    return ffn(x2), k, v


def prefill(x, pos):
    S = x.shape[0]
    h = rms_norm(x, W["attn_norm"])
    q = F.linear(h, W["wq"]).view(S, H, HD).transpose(0, 1)
    k = F.linear(h, W["wk"]).view(S, KV, HD).transpose(0, 1)
    v = F.linear(h, W["wv"]).view(S, KV, HD).transpose(0, 1)
    q, k = rope(q, pos), rope(k, pos)
    a = attention(q, k, v, True)
    x2 = x + F.linear(a.transpose(0, 1).reshape(S, D), W["wo"])
    return ffn(x2)


MD, MH = 1024, 4096
M = dict(w1=rnd(MH, MD), b1=rnd(MH), w2=rnd(MH, MH), b2=rnd(MH), w3=rnd(MD, MH), b3=rnd(MD))


def mlp(x):
    y = F.gelu(F.linear(x, M["w1"], M["b1"]), approximate="tanh")
    y = F.gelu(F.linear(y, M["w2"], M["b2"]), approximate="tanh")
    return F.linear(y, M["w3"], M["b3"])


work = {
    "decode": (decode, rnd(1, D), torch.tensor([512]), rnd(KV, 512, HD), rnd(KV, 512, HD)),
    "prefill": (prefill, rnd(128, D), torch.arange(128)),
    "mlp_b1": (mlp, rnd(1, MD)),
    "mlp_b32": (mlp, rnd(32, MD)),
}
print(f"torch {torch.__version__}, {torch.get_num_threads()} threads", flush=True)
for name, (fn, *args) in work.items():
    if ONLY and name not in ONLY:
        continue
    print(f"{name} median_ms={median_ms(fn, *args, reps=REPS, warmup=2):.3f}", flush=True)
