#!/usr/bin/python3
"""Writes a GGUF file (llama.cpp's format) with the weights of a Hugging Face Llama folder.

    /usr/bin/python3 bench/llama/make_gguf.py MODEL_DIR OUT.gguf [--dtype f32|f16]

For the llama.cpp baseline of bench/llama: the same weights, so both sides compute the
same function. llama.cpp's RoPE rotates adjacent pairs where Hugging Face rotates halves,
so (as llama.cpp's own converter does) the rows of q_proj and k_proj are permuted per head:
row (h, i, j) <- (h, j, i) for i in [0, 2), j in [0, head_dim / 2). Norm weights are stored
in f32, matrices in --dtype (default: the checkpoint's, f32 or f16). The vocabulary is
"no_vocab" with llama.vocab_size dummy tokens: the benchmark feeds token ids directly.
"""
import argparse
import json
import os
import struct

import numpy as np

NP = {"F32": np.float32, "F16": np.float16, "BF16": None, "I32": np.int32}
GGML_TYPE = {np.float32: 0, np.float16: 1}
ALIGN = 32


def read_safetensors(path):
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n])
    body = memoryview(data)[8 + n:]
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        b, e = info["data_offsets"]
        if info["dtype"] == "BF16":
            raw = np.frombuffer(body[b:e], dtype=np.uint16).astype(np.uint32) << 16
            arr = raw.view(np.float32)
        else:
            arr = np.frombuffer(body[b:e], dtype=NP[info["dtype"]])
        out[name] = arr.reshape(info["shape"])
    return out


def load(model_dir):
    index = os.path.join(model_dir, "model.safetensors.index.json")
    files = ["model.safetensors"]
    if os.path.exists(index):
        with open(index) as f:
            files = sorted(set(json.load(f)["weight_map"].values()))
    w = {}
    for name in files:
        w.update(read_safetensors(os.path.join(model_dir, name)))
    return w


def permute_rope(w, heads):
    rows, cols = w.shape
    return w.reshape(heads, 2, rows // heads // 2, cols).swapaxes(1, 2).reshape(rows, cols)


class Writer:
    def __init__(self):
        self.kv = []
        self.tensors = []

    def add(self, key, vtype, value):
        self.kv.append((key, vtype, value))

    @staticmethod
    def string(s):
        b = s.encode()
        return struct.pack("<Q", len(b)) + b

    def value(self, vtype, v):
        if vtype == "u32":
            return struct.pack("<I", 4) + struct.pack("<I", v)
        if vtype == "f32":
            return struct.pack("<I", 6) + struct.pack("<f", v)
        if vtype == "str":
            return struct.pack("<I", 8) + self.string(v)
        raise ValueError(vtype)

    def write(self, path):
        head = b"GGUF" + struct.pack("<IQQ", 3, len(self.tensors), len(self.kv))
        for key, vtype, v in self.kv:
            head += self.string(key) + self.value(vtype, v)
        offset, infos, blobs = 0, b"", []
        for name, arr in self.tensors:
            arr = np.ascontiguousarray(arr)
            infos += self.string(name) + struct.pack("<I", arr.ndim)
            for d in reversed(arr.shape):  # ggml: ne[0] is the fastest-varying dim
                infos += struct.pack("<Q", d)
            infos += struct.pack("<IQ", GGML_TYPE[arr.dtype.type], offset)
            raw = arr.tobytes()
            pad = (-len(raw)) % ALIGN
            blobs.append(raw + b"\0" * pad)
            offset += len(raw) + pad
        meta = head + infos
        meta += b"\0" * ((-len(meta)) % ALIGN)
        with open(path, "wb") as f:
            f.write(meta)
            for b in blobs:
                f.write(b)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model_dir")
    ap.add_argument("out")
    ap.add_argument("--dtype", choices=["f32", "f16"])
    args = ap.parse_args()
    with open(os.path.join(args.model_dir, "config.json")) as f:
        c = json.load(f)
    w = load(args.model_dir)
    heads, kv_heads = c["num_attention_heads"], c.get("num_key_value_heads") or c["num_attention_heads"]
    head_dim = c.get("head_dim") or c["hidden_size"] // heads
    mat = np.float16 if (args.dtype == "f16" or (args.dtype is None and
                                                 w["model.norm.weight"].dtype == np.float16)) else np.float32
    g = Writer()
    g.add("general.architecture", "str", "llama")
    g.add("general.name", "str", "luminal-bench")
    g.add("general.alignment", "u32", ALIGN)
    g.add("general.file_type", "u32", 1 if mat == np.float16 else 0)
    g.add("llama.context_length", "u32", c.get("max_position_embeddings", 2048))
    g.add("llama.embedding_length", "u32", c["hidden_size"])
    g.add("llama.block_count", "u32", c["num_hidden_layers"])
    g.add("llama.feed_forward_length", "u32", c["intermediate_size"])
    g.add("llama.attention.head_count", "u32", heads)
    g.add("llama.attention.head_count_kv", "u32", kv_heads)
    g.add("llama.attention.key_length", "u32", head_dim)
    g.add("llama.attention.value_length", "u32", head_dim)
    g.add("llama.rope.dimension_count", "u32", head_dim)
    g.add("llama.attention.layer_norm_rms_epsilon", "f32", c.get("rms_norm_eps", 1e-6))
    g.add("llama.rope.freq_base", "f32", c.get("rope_theta", 10000.0))
    g.add("llama.vocab_size", "u32", c["vocab_size"])
    g.add("tokenizer.ggml.model", "str", "no_vocab")

    def t(name, arr, norm=False):
        g.tensors.append((name, arr.astype(np.float32 if norm else mat)))

    t("token_embd.weight", w["model.embed_tokens.weight"])
    for l in range(c["num_hidden_layers"]):
        p, q = f"model.layers.{l}.", f"blk.{l}."
        t(q + "attn_norm.weight", w[p + "input_layernorm.weight"], norm=True)
        t(q + "attn_q.weight", permute_rope(w[p + "self_attn.q_proj.weight"], heads))
        t(q + "attn_k.weight", permute_rope(w[p + "self_attn.k_proj.weight"], kv_heads))
        t(q + "attn_v.weight", w[p + "self_attn.v_proj.weight"])
        t(q + "attn_output.weight", w[p + "self_attn.o_proj.weight"])
        t(q + "ffn_norm.weight", w[p + "post_attention_layernorm.weight"], norm=True)
        t(q + "ffn_gate.weight", w[p + "mlp.gate_proj.weight"])
        t(q + "ffn_up.weight", w[p + "mlp.up_proj.weight"])
        t(q + "ffn_down.weight", w[p + "mlp.down_proj.weight"])
    t("output_norm.weight", w["model.norm.weight"], norm=True)
    if not c.get("tie_word_embeddings", False):
        t("output.weight", w["lm_head.weight"])
    g.write(args.out)
    print(f"make_gguf: wrote {args.out} ({len(g.tensors)} tensors, {mat.__name__} matrices)")


if __name__ == "__main__":
    main()
