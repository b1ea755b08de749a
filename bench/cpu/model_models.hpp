// The models of bench/cpu/model_bench.cpp, built with the public API exactly as
// bench/cpu/torch_models.py builds them in PyTorch (same shapes, weights as [out, in]).
#pragma once

#include <cstdint>
#include <string>

#include "luminal/luminal.hpp"

namespace model_bench {

struct Llama {
  int64_t d = 2048, heads = 16, kv_heads = 4, ffn = 5632;
  int64_t head_dim() const { return d / heads; }
  /// Bytes of f32 weights one block reads (q, k, v, o, gate, up, down, two norms).
  int64_t weight_bytes() const {
    const int64_t kv = kv_heads * head_dim();
    return 4 * (2 * d * d + 2 * kv * d + 3 * ffn * d + 2 * d);
  }
};

/// Attention over k/v [KV, T, hd] for q [H, S, hd], keys repeated for grouped queries.
inline luminal::Tensor gqa(const Llama& c, const luminal::Tensor& q, const luminal::Tensor& k,
                           const luminal::Tensor& v, const luminal::Dim& T, bool causal) {
  using namespace luminal;
  const int64_t H = c.heads, KV = c.kv_heads, G = H / KV, hd = c.head_dim();
  auto rep = [&](const Tensor& t) {
    return reshape(expand(reshape(t, {KV, 1, T, hd}), {KV, G, T, hd}), {H, T, hd});
  };
  return scaled_dot_product_attention(q, rep(k), rep(v), causal);
}

/// Feed-forward half of the block: x2 + down(silu(gate(h)) * up(h)), h = rms_norm(x2).
inline luminal::Tensor ffn(luminal::Graph& g, const Llama& c, const luminal::Tensor& x2) {
  using namespace luminal;
  Tensor h2 = rms_norm(x2, g.param("ffn_norm", {c.d}));
  Tensor f =
      linear(silu(linear(h2, g.param("w_gate", {c.ffn, c.d}))) * linear(h2, g.param("w_up", {c.ffn, c.d})),
             g.param("w_down", {c.d, c.ffn}));
  return x2 + f;
}

/// One decode step: x [1, d] at position `past`, with a KV cache of `past` tokens.
inline void build_decode(luminal::Graph& g, const Llama& c, int64_t past) {
  using namespace luminal;
  const int64_t H = c.heads, KV = c.kv_heads, hd = c.head_dim();
  Tensor x = g.input("x", {1, c.d});
  Tensor pos = g.input("pos", {1}, i32);
  Tensor kc = g.input("k_cache", {KV, past, hd});
  Tensor vc = g.input("v_cache", {KV, past, hd});
  Tensor h = rms_norm(x, g.param("attn_norm", {c.d}));
  Tensor q = permute(reshape(linear(h, g.param("wq", {H * hd, c.d})), {1, H, hd}), {1, 0, 2});
  Tensor k = permute(reshape(linear(h, g.param("wk", {KV * hd, c.d})), {1, KV, hd}), {1, 0, 2});
  Tensor v = permute(reshape(linear(h, g.param("wv", {KV * hd, c.d})), {1, KV, hd}), {1, 0, 2});
  q = rope(q, pos);
  k = rope(k, pos);
  Tensor K = concat({kc, k}, 1), V = concat({vc, v}, 1);
  Tensor a = gqa(c, q, K, V, past + 1, false);  // [H, 1, hd]
  Tensor o = reshape(permute(a, {1, 0, 2}), {1, H * hd});
  Tensor x2 = x + linear(o, g.param("wo", {c.d, H * hd}));
  g.output("y", ffn(g, c, x2));
  g.output("k", k);
  g.output("v", v);
}

/// Prefill of `seq` tokens (causal attention over themselves).
inline void build_prefill(luminal::Graph& g, const Llama& c, int64_t seq) {
  using namespace luminal;
  const int64_t H = c.heads, KV = c.kv_heads, hd = c.head_dim();
  Tensor x = g.input("x", {seq, c.d});
  Tensor pos = g.input("pos", {seq}, i32);
  Tensor h = rms_norm(x, g.param("attn_norm", {c.d}));
  Tensor q = permute(reshape(linear(h, g.param("wq", {H * hd, c.d})), {seq, H, hd}), {1, 0, 2});
  Tensor k = permute(reshape(linear(h, g.param("wk", {KV * hd, c.d})), {seq, KV, hd}), {1, 0, 2});
  Tensor v = permute(reshape(linear(h, g.param("wv", {KV * hd, c.d})), {seq, KV, hd}), {1, 0, 2});
  q = rope(q, pos);
  k = rope(k, pos);
  Tensor a = gqa(c, q, k, v, seq, true);
  Tensor o = reshape(permute(a, {1, 0, 2}), {seq, H * hd});
  Tensor x2 = x + linear(o, g.param("wo", {c.d, H * hd}));
  g.output("y", ffn(g, c, x2));
}

/// 3-layer MLP: d -> h (gelu) -> h (gelu) -> d, weights [out, in] with biases.
struct Mlp {
  int64_t d = 1024, h = 4096;
  int64_t weight_bytes() const { return 4 * (2 * d * h + h * h + 2 * h + d); }
};
inline void build_mlp(luminal::Graph& g, const Mlp& m, int64_t batch) {
  using namespace luminal;
  Tensor x = g.input("x", {batch, m.d});
  Tensor y = gelu(linear(x, g.param("w1", {m.h, m.d}), g.param("b1", {m.h})));
  y = gelu(linear(y, g.param("w2", {m.h, m.h}), g.param("b2", {m.h})));
  g.output("y", linear(y, g.param("w3", {m.d, m.h}), g.param("b3", {m.d})));
}

}  // namespace model_bench
