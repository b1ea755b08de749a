#!/usr/bin/python3
"""PyTorch 1.13 eager baseline for bench/llama: the same Llama checkpoint folder, prefill of
P tokens then D greedy decode steps with a preallocated KV cache, N threads.

    /usr/bin/python3 bench/llama/torch_llama.py MODEL_DIR [--prompt 128] [--decode 32]
        [--reps 5] [--threads 2]

Weights are used in the dtype they are stored in for matmuls when that is f32; f16/bf16
checkpoints are converted to f32 once at load (PyTorch's CPU f16 matmul is far slower than
its f32 one, so this is its best configuration). Prints medians like llama_bench.
"""
import argparse
import os
import sys
import time

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tools", "make-llama"))
from reference import Llama  # noqa: E402  (our own model definition and loader)


class Cached(Llama):
    def rope_at(self, x, pos):  # x [heads, S, hd], pos [S]
        return self.rope(x, pos)

    def step(self, ids, start, kc, vc):
        """ids: tokens at positions start..start+S-1; kc/vc: per layer [KV, T, hd] buffers."""
        w, S, H, KV, hd = self.w, len(ids), self.heads, self.kv_heads, self.head_dim
        pos = torch.arange(start, start + S)
        h = w["model.embed_tokens.weight"][torch.tensor(ids, dtype=torch.long)]
        T = start + S
        mask = None
        if S > 1:
            mask = torch.ones(S, T, dtype=torch.bool).tril(diagonal=start)
        for l in range(self.layers):
            p = f"model.layers.{l}."
            x = self.rms(h, w[p + "input_layernorm.weight"])
            q = (x @ w[p + "self_attn.q_proj.weight"].T).view(S, H, hd).transpose(0, 1)
            k = (x @ w[p + "self_attn.k_proj.weight"].T).view(S, KV, hd).transpose(0, 1)
            v = (x @ w[p + "self_attn.v_proj.weight"].T).view(S, KV, hd).transpose(0, 1)
            q, k = self.rope(q, pos), self.rope(k, pos)
            kc[l][:, start:T] = k
            vc[l][:, start:T] = v
            K = kc[l][:, :T].repeat_interleave(H // KV, dim=0)
            V = vc[l][:, :T].repeat_interleave(H // KV, dim=0)
            s = (q @ K.transpose(1, 2)) / (hd ** 0.5)
            if mask is not None:
                s = s.masked_fill(~mask, float("-inf"))
            a = (s.softmax(-1) @ V).transpose(0, 1).reshape(S, H * hd)
            h = h + a @ w[p + "self_attn.o_proj.weight"].T
            y = self.rms(h, w[p + "post_attention_layernorm.weight"])
            h = h + (torch.nn.functional.silu(y @ w[p + "mlp.gate_proj.weight"].T) *
                     (y @ w[p + "mlp.up_proj.weight"].T)) @ w[p + "mlp.down_proj.weight"].T
        h = self.rms(h[-1:], w["model.norm.weight"])
        head = w["model.embed_tokens.weight"] if self.tied else w["lm_head.weight"]
        return (h @ head.T)[0]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model_dir")
    ap.add_argument("--prompt", type=int, default=128)
    ap.add_argument("--decode", type=int, default=32)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    torch.set_grad_enabled(False)
    m = Cached(args.model_dir)
    vocab = m.w["model.embed_tokens.weight"].shape[0]
    tokens = [(i * 7919 + 13) % vocab for i in range(args.prompt)]
    T = args.prompt + args.decode + 1
    pre, dec, ids = [], [], []
    for r in range(-1, args.reps):
        kc = [torch.empty(m.kv_heads, T, m.head_dim) for _ in range(m.layers)]
        vc = [torch.empty(m.kv_heads, T, m.head_dim) for _ in range(m.layers)]
        t0 = time.perf_counter()
        nxt = int(m.step(tokens, 0, kc, vc).argmax())
        tp = time.perf_counter() - t0
        out = [nxt]
        t0 = time.perf_counter()
        for s in range(args.decode):
            nxt = int(m.step([nxt], args.prompt + s, kc, vc).argmax())
            out.append(nxt)
        td = time.perf_counter() - t0
        if r >= 0:
            pre.append(args.prompt / tp)
            dec.append(args.decode / td)
            ids = out
    pre.sort()
    dec.sort()
    print("tokens: " + ",".join(map(str, ids)))
    print(f"prefill_tokens_per_s={pre[len(pre) // 2]:.2f}")
    print(f"decode_tokens_per_s={dec[len(dec) // 2]:.2f}")


if __name__ == "__main__":
    main()
