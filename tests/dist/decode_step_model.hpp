// The decode step the tensor-parallel tests and bench/dist/fusion_bench share.
#pragma once

#include <string>

#include "luminal/luminal.hpp"

namespace luminal::test {

// One decode step of a Llama-style model as examples/llama builds it: one token at
// position P after P cached tokens, RMSNorm, RoPE, the new K/V rows appended to the
// layer's cache (concat) and returned as outputs, GQA attention over P + 1 keys, SwiGLU.
inline Graph tp_decode_step(int64_t layers) {
  const int64_t D = 512, H = 8, KV = 4, hd = 64, F = 1536, G = H / KV;
  Graph g;
  const Dim P = g.dim("P", 1, 127), T = P + 1;
  const Tensor pos = slice(arange(T), 0, P, T);
  Tensor h = g.input("x", {1, D});
  for (int64_t l = 0; l < layers; ++l) {
    const std::string ls = std::to_string(l);
    auto proj = [&](const Tensor& x, const char* w, int64_t out, int64_t in) {
      return linear(x, g.param(w + ls, {out, in}));
    };
    auto heads_major = [&](const Tensor& t) {  // [T, KV, hd] -> [H, T, hd], KV heads repeated
      return reshape(expand(reshape(permute(t, {1, 0, 2}), {KV, 1, T, hd}), {KV, G, T, hd}), {H, T, hd});
    };
    const Tensor x = rms_norm(h, g.param("attn_norm" + ls, {D}));
    const Tensor q = rope(permute(reshape(proj(x, "wq", H * hd, D), {1, H, hd}), {1, 0, 2}), pos, 10000.f);
    const Tensor k = permute(
        rope(permute(reshape(proj(x, "wk", KV * hd, D), {1, KV, hd}), {1, 0, 2}), pos, 10000.f), {1, 0, 2});
    const Tensor v = reshape(proj(x, "wv", KV * hd, D), {1, KV, hd});
    g.output("k." + ls, k);
    g.output("v." + ls, v);
    const Tensor keys = concat({g.input("k_cache." + ls, {P, KV, hd}), k}, 0);
    const Tensor values = concat({g.input("v_cache." + ls, {P, KV, hd}), v}, 0);
    const Tensor a = scaled_dot_product_attention(q, heads_major(keys), heads_major(values), false);
    h = h + proj(reshape(permute(a, {1, 0, 2}), {1, H * hd}), "wo", D, H * hd);
    const Tensor y = rms_norm(h, g.param("mlp_norm" + ls, {D}));
    h = h + proj(silu(proj(y, "wg", F, D)) * proj(y, "wu", F, D), "wd", D, F);
  }
  g.output("y", h);
  return g;
}

}  // namespace luminal::test
