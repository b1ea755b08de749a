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
    m = Llama(args.model_dir)
    vocab = m.w["model.embed_tokens.weight"].shape[0]
    tokens = [(i * 7919 + 13) % vocab for i in range(args.prompt)]
    T = args.prompt + args.decode + 1
    pre, dec, ids = [], [], []
    for r in range(-1, args.reps):
        cache = [(torch.empty(m.kv_heads, T, m.head_dim), torch.empty(m.kv_heads, T, m.head_dim))
                 for _ in range(m.layers)]

        def step(ids, start):  # the last position's logits, the cache filled through start + len(ids)
            return m.logits(m.hidden(ids, start, cache)[-1:])[0]

        t0 = time.perf_counter()
        nxt = int(step(tokens, 0).argmax())
        tp = time.perf_counter() - t0
        out = [nxt]
        t0 = time.perf_counter()
        for s in range(args.decode):
            nxt = int(step([nxt], args.prompt + s).argmax())
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
