#!/usr/bin/python3
"""Reference logits for a Llama checkpoint folder, from our own PyTorch implementation.

    /usr/bin/python3 tools/make-llama/reference.py MODEL_DIR --tokens 1,2,3 --steps 16 \
        --out MODEL_DIR/reference.safetensors

Follows transformers' LlamaForCausalLM (RMSNorm, rotate-half RoPE, grouped-query causal
attention, SwiGLU, tied or separate lm_head) in float32: f16/bf16 weights are converted
to f32 exactly, as Luminal's example does. Greedy decoding; every step recomputes the
whole sequence without a KV cache, so it checks the C++ side's cache independently.

Writes a safetensors file with "prompt" (I32 [S]), "tokens" (I32 [steps + 1]: the token
chosen after the prompt and after each decode step) and "logits" (F32 [steps + 1, vocab]:
the last position's logits after the prompt and after each decode step). Needs only
torch (Debian's python3-torch), no transformers or safetensors package.
"""
import argparse
import json
import os
import struct

import torch

DTYPES = {"F32": torch.float32, "F16": torch.float16, "BF16": torch.bfloat16, "I32": torch.int32}


def read_safetensors(path):
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n])
    body = data[8 + n:]
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        b, e = info["data_offsets"]
        t = torch.frombuffer(bytearray(body[b:e]), dtype=DTYPES[info["dtype"]]) if e > b else torch.empty(0)
        out[name] = t.reshape(info["shape"])
    return out


def write_safetensors(path, tensors):
    names = {torch.float32: "F32", torch.int32: "I32"}
    header, blobs, off = {}, [], 0
    for name, t in tensors.items():
        raw = t.contiguous().numpy().tobytes()
        header[name] = {"dtype": names[t.dtype], "shape": list(t.shape), "data_offsets": [off, off + len(raw)]}
        blobs.append(raw)
        off += len(raw)
    text = json.dumps(header).encode()
    text += b" " * ((8 - (len(text) + 8) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + b"".join(blobs))


def load_weights(model_dir):
    index = os.path.join(model_dir, "model.safetensors.index.json")
    if os.path.exists(index):
        with open(index) as f:
            files = sorted(set(json.load(f)["weight_map"].values()))
    else:
        files = ["model.safetensors"]
    w = {}
    for name in files:
        w.update(read_safetensors(os.path.join(model_dir, name)))
    return {k: v.float() for k, v in w.items()}


class Llama:
    def __init__(self, model_dir):
        with open(os.path.join(model_dir, "config.json")) as f:
            c = json.load(f)
        self.d = c["hidden_size"]
        self.layers = c["num_hidden_layers"]
        self.heads = c["num_attention_heads"]
        self.kv_heads = c.get("num_key_value_heads") or self.heads
        self.head_dim = c.get("head_dim") or self.d // self.heads
        self.eps = c.get("rms_norm_eps", 1e-6)
        self.theta = c.get("rope_theta", 10000.0)
        self.tied = c.get("tie_word_embeddings", False)
        self.w = load_weights(model_dir)

    def rms(self, x, w):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * w

    def rope(self, x, pos):  # x [heads, S, hd]
        hd = self.head_dim
        inv_freq = 1.0 / (self.theta ** (torch.arange(0, hd, 2, dtype=torch.int64).float() / hd))
        freqs = pos.float()[:, None] * inv_freq[None, :]
        emb = torch.cat((freqs, freqs), dim=-1)
        half = hd // 2
        rot = torch.cat((-x[..., half:], x[..., :half]), dim=-1)
        return x * emb.cos() + rot * emb.sin()

    def hidden(self, ids, start=0, cache=None):
        """The residual stream after the last layer for tokens at positions start..start+S-1.
        cache: None (a whole sequence from position 0) or per-layer (k, v) buffers
        [KV, T, hd] that hold positions 0..start-1 and receive this call's keys and values."""
        w, S, H, KV, hd = self.w, len(ids), self.heads, self.kv_heads, self.head_dim
        T = start + S
        pos = torch.arange(start, T)
        h = w["model.embed_tokens.weight"][torch.tensor(ids, dtype=torch.long)]
        mask = torch.ones(S, T, dtype=torch.bool).tril(diagonal=start) if S > 1 else None
        for l in range(self.layers):
            p = f"model.layers.{l}."
            x = self.rms(h, w[p + "input_layernorm.weight"])
            q = (x @ w[p + "self_attn.q_proj.weight"].T).view(S, H, hd).transpose(0, 1)
            k = (x @ w[p + "self_attn.k_proj.weight"].T).view(S, KV, hd).transpose(0, 1)
            v = (x @ w[p + "self_attn.v_proj.weight"].T).view(S, KV, hd).transpose(0, 1)
            q, k = self.rope(q, pos), self.rope(k, pos)
            if cache is not None:
                kc, vc = cache[l]
                kc[:, start:T] = k
                vc[:, start:T] = v
                k, v = kc[:, :T], vc[:, :T]
            k = k.repeat_interleave(H // KV, dim=0)
            v = v.repeat_interleave(H // KV, dim=0)
            s = (q @ k.transpose(1, 2)) / (hd ** 0.5)
            if mask is not None:
                s = s.masked_fill(~mask, float("-inf"))
            a = (s.softmax(-1) @ v).transpose(0, 1).reshape(S, H * hd)
            h = h + a @ w[p + "self_attn.o_proj.weight"].T
            y = self.rms(h, w[p + "post_attention_layernorm.weight"])
            g = y @ w[p + "mlp.gate_proj.weight"].T
            u = y @ w[p + "mlp.up_proj.weight"].T
            h = h + (torch.nn.functional.silu(g) * u) @ w[p + "mlp.down_proj.weight"].T
        return h

    def logits(self, h):  # the final norm and the LM head: [S, d] -> [S, vocab]
        h = self.rms(h, self.w["model.norm.weight"])
        head = self.w["model.embed_tokens.weight"] if self.tied else self.w["lm_head.weight"]
        return h @ head.T

    def forward(self, ids):  # ids: list of ints -> logits [S, vocab]
        return self.logits(self.hidden(ids))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model_dir")
    ap.add_argument("--tokens", required=True)
    ap.add_argument("--steps", type=int, default=16)
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    torch.set_grad_enabled(False)
    m = Llama(args.model_dir)
    prompt = [int(t) for t in args.tokens.split(",")]
    ids, logits, chosen = list(prompt), [], []
    margin = float("inf")
    for _ in range(args.steps + 1):
        last = m.forward(ids)[-1]
        top2 = last.topk(2).values
        margin = min(margin, float(top2[0] - top2[1]))
        nxt = int(last.argmax())
        logits.append(last)
        chosen.append(nxt)
        ids.append(nxt)
    write_safetensors(args.out, {
        "prompt": torch.tensor(prompt, dtype=torch.int32),
        "tokens": torch.tensor(chosen, dtype=torch.int32),
        "logits": torch.stack(logits).contiguous(),
    })
    print(f"reference: tokens {','.join(map(str, chosen))}; smallest top-1/top-2 logit gap {margin:.4g}")


if __name__ == "__main__":
    main()
