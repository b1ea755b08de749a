// Models the compiler tests and benchmarks share (MLP, Llama-style decoder block, a stack
// of blocks) and translation validation: a compiled program against direct interpretation.
#pragma once

#include <cmath>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "backends/reference/interpreter.hpp"
#include "compiler/compile_graph.hpp"
#include "luminal/luminal.hpp"

namespace luminal::test {

/// y = linear(gelu(linear(x, w1, b1)), w2, b2); x [B, d].
inline void build_mlp(Graph& g, int64_t B, int64_t d, int64_t h) {
  Tensor x = g.input("x", {B, d});
  Tensor y = linear(gelu(linear(x, g.param("w1", {h, d}), g.param("b1", {h}))), g.param("w2", {d, h}),
                    g.param("b2", {d}));
  g.output("y", y);
}

struct BlockConfig {
  int64_t seq = 8, d_model = 64, heads = 4, kv_heads = 2, ffn = 96;
  /// How the projection weights are stored (f16/bf16: linear widens them to f32).
  DType weights = f32;
  int64_t head_dim() const { return d_model / heads; }
  /// Llama-3-8B-sized layer over 128 tokens: d_model 4096, 32 heads, 8 KV heads, FFN 14336.
  static BlockConfig llama_4096() { return BlockConfig{128, 4096, 32, 8, 14336}; }
};

/// A Llama-style decoder layer: RMSNorm, RoPE, GQA attention with a causal mask, SwiGLU.
inline Tensor decoder_block(Graph& g, const BlockConfig& c, const Tensor& x, const Tensor& pos,
                            const std::string& p) {
  const int64_t S = c.seq, D = c.d_model, H = c.heads, KV = c.kv_heads, hd = c.head_dim(), G = H / KV;
  Tensor h = rms_norm(x, g.param(p + "attn_norm", {D}));
  Tensor q = permute(reshape(linear(h, g.param(p + "wq", {H * hd, D}, c.weights)), {S, H, hd}), {1, 0, 2});
  Tensor k = permute(reshape(linear(h, g.param(p + "wk", {KV * hd, D}, c.weights)), {S, KV, hd}), {1, 0, 2});
  Tensor v = permute(reshape(linear(h, g.param(p + "wv", {KV * hd, D}, c.weights)), {S, KV, hd}), {1, 0, 2});
  q = rope(q, pos);
  k = rope(k, pos);
  auto repeat_kv = [&](const Tensor& t) {
    return reshape(expand(reshape(t, {KV, 1, S, hd}), {KV, G, S, hd}), {H, S, hd});
  };
  Tensor a = scaled_dot_product_attention(q, repeat_kv(k), repeat_kv(v), true);  // [H, S, hd]
  Tensor o = reshape(permute(a, {1, 0, 2}), {S, H * hd});
  Tensor x2 = x + linear(o, g.param(p + "wo", {D, H * hd}, c.weights));
  Tensor h2 = rms_norm(x2, g.param(p + "ffn_norm", {D}));
  Tensor f = linear(
      silu(linear(h2, g.param(p + "w_gate", {c.ffn, D}, c.weights))) * linear(h2, g.param(p + "w_up", {c.ffn, D}, c.weights)),
      g.param(p + "w_down", {D, c.ffn}, c.weights));
  return x2 + f;
}

inline void build_model(Graph& g, const BlockConfig& c, int layers) {
  Tensor x = g.input("x", {c.seq, c.d_model});
  Tensor pos = g.input("pos", {c.seq}, i32);
  for (int l = 0; l < layers; ++l) {
    // Appends rather than "l" + to_string(l): GCC 12 reports a false -Wrestrict there.
    std::string prefix = "l";
    prefix.append(std::to_string(l)).append(".");
    x = decoder_block(g, c, x, pos, prefix);
  }
  g.output("y", x);
}

/// A decode step's attention: one query row per head over a KV cache of `past` rows (a
/// dim in [0, 4096]) and the step's new row (grouped heads, concat(cache, new) read in
/// place). Few rows over many keys: the GPU lowering's flash-decoding form.
inline void build_decode_attention(Graph& g, int64_t heads, int64_t kv_heads, int64_t head_dim) {
  const Dim past = Dim::variable("past", 0, 4096);
  const int64_t group = heads / kv_heads;
  Tensor q = g.input("q", {heads, 1, head_dim});
  Tensor K =
      concat({g.input("k_cache", {kv_heads, past, head_dim}), g.input("k_new", {kv_heads, 1, head_dim})}, 1);
  Tensor V =
      concat({g.input("v_cache", {kv_heads, past, head_dim}), g.input("v_new", {kv_heads, 1, head_dim})}, 1);
  auto rep = [&](const Tensor& t) {
    return reshape(expand(reshape(t, {Dim(kv_heads), Dim(1), past + 1, Dim(head_dim)}),
                          {Dim(kv_heads), Dim(group), past + 1, Dim(head_dim)}),
                   {Dim(heads), past + 1, Dim(head_dim)});
  };
  g.output("y", scaled_dot_product_attention(q, rep(K), rep(V)));
}

/// The sizes of a decode step (build_decode_block_f16): Llama-3-8B's by default.
struct DecodeSizes {
  int64_t d = 4096, heads = 32, kv_heads = 8, head_dim = 128, ffn = 14336;
};

/// `seq` tokens through a Llama-3-8B-shaped block in f16 (activations and weights):
/// attending to a KV cache of `past` tokens before them (inputs k_cache, v_cache), or,
/// without one, causally to their own keys; outputs y and the new k, v.
inline void build_block_f16(Graph& g, int64_t seq, std::optional<int64_t> past, const DecodeSizes& z) {
  const int64_t S = seq, d = z.d, H = z.heads, KV = z.kv_heads, hd = z.head_dim, ffn = z.ffn, G = H / KV;
  auto p = [&](const char* n, std::vector<Dim> s) { return g.param(n, s, f16); };
  Tensor x = g.input("x", {S, d}, f16);
  Tensor pos = g.input("pos", {S}, i32);
  std::optional<Tensor> kc, vc;
  if (past) {
    kc = g.input("k_cache", {KV, *past, hd}, f16);
    vc = g.input("v_cache", {KV, *past, hd}, f16);
  }
  Tensor h = rms_norm(x, p("attn_norm", {d}));
  Tensor q = permute(reshape(linear(h, p("wq", {H * hd, d})), {S, H, hd}), {1, 0, 2});
  Tensor k = permute(reshape(linear(h, p("wk", {KV * hd, d})), {S, KV, hd}), {1, 0, 2});
  Tensor v = permute(reshape(linear(h, p("wv", {KV * hd, d})), {S, KV, hd}), {1, 0, 2});
  q = rope(q, pos);
  k = rope(k, pos);
  const int64_t keys = past.value_or(0) + S;
  Tensor K = past ? concat({*kc, k}, 1) : k, V = past ? concat({*vc, v}, 1) : v;
  auto rep = [&](const Tensor& t) {
    return reshape(expand(reshape(t, {KV, 1, keys, hd}), {KV, G, keys, hd}), {H, keys, hd});
  };
  Tensor a = scaled_dot_product_attention(q, rep(K), rep(V), !past);
  Tensor x2 = x + linear(reshape(permute(a, {1, 0, 2}), {S, H * hd}), p("wo", {d, H * hd}));
  Tensor h2 = rms_norm(x2, p("ffn_norm", {d}));
  Tensor f = linear(silu(linear(h2, p("w_gate", {ffn, d}))) * linear(h2, p("w_up", {ffn, d})),
                    p("w_down", {d, ffn}));
  g.output("y", x2 + f);
  g.output("k", k);
  g.output("v", v);
}

/// One decode step of a Llama-3-8B block in f16 (d_model 4096, 32 heads, 8 KV heads, FFN
/// 14336): weights and the KV cache of `past` tokens read once; outputs y and the new k, v.
inline void build_decode_block_f16(Graph& g, int64_t past, const DecodeSizes& z = {}) {
  build_block_f16(g, 1, past, z);
}

/// A prefill of `seq` tokens through the same block in f16, no cache: causal attention over
/// the step's own keys; outputs y and the new k, v.
inline void build_prefill_block_f16(Graph& g, int64_t seq, const DecodeSizes& z = {}) {
  build_block_f16(g, seq, std::nullopt, z);
}

/// Random data for every Input and Param of `g` (floats in [-1, 1]; i32 in [0, n)).
inline std::map<std::string, HostTensor> random_inputs(const detail::GraphImpl& g, uint64_t seed,
                                                       const DimBindings& dims = {}) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  std::map<std::string, HostTensor> out;
  auto fill = [&](uint32_t id) {
    const detail::Node& n = g.nodes[id];
    std::vector<int64_t> shape;
    int64_t count = 1;
    for (const Dim& d : n.shape) {
      shape.push_back(d.evaluate(dims));
      count *= shape.back();
    }
    if (n.dtype == i32) {
      std::vector<int32_t> v(static_cast<size_t>(count));
      const int64_t hi = shape.empty() ? 4 : std::max<int64_t>(shape.back(), 1);
      for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<int32_t>(static_cast<int64_t>(i) % hi);
      out.emplace(n.name, HostTensor::from(v, shape));
    } else if (n.dtype == boolean) {
      std::vector<bool> v(static_cast<size_t>(count));
      for (size_t i = 0; i < v.size(); ++i) v[i] = u(rng) > 0;
      out.emplace(n.name, HostTensor::from(v, shape));
    } else {
      std::vector<float> v(static_cast<size_t>(count));
      for (float& x : v) x = u(rng);
      out.emplace(n.name, HostTensor::from_f32(v, shape, n.dtype));
    }
  };
  for (uint32_t id : g.inputs) fill(id);
  for (uint32_t id : g.params) fill(id);
  return out;
}

/// Largest |a - b| / (atol + rtol |b|) over all outputs; NaN/inf must match exactly.
inline double compare_outputs(const std::map<std::string, HostTensor>& got,
                              const std::map<std::string, HostTensor>& want, double atol = 1e-4,
                              double rtol = 1e-4) {
  double worst = 0;
  for (const auto& [name, w] : want) {
    const HostTensor& a = got.at(name);
    if (a.shape() != w.shape() || a.dtype() != w.dtype()) return 1e30;
    std::vector<float> x = a.to_f32(), y = w.to_f32();
    for (size_t i = 0; i < x.size(); ++i) {
      if (std::isnan(y[i]) || std::isinf(y[i])) {
        if (!(std::isnan(x[i]) && std::isnan(y[i])) && x[i] != y[i]) return 1e30;
        continue;
      }
      worst = std::max(worst, std::abs(double(x[i]) - double(y[i])) / (atol + rtol * std::abs(double(y[i]))));
    }
  }
  return worst;
}

/// Every output within `rel` of its largest magnitude (but for NaN and inf, which must
/// match), as compare_outputs measures it; for a decode step's f16 outputs: a backend sums
/// each dot product in another order than the interpreter, which moves f32 results by a
/// few of their ulps and, now and then, a rounding to f16 by one ulp -- of the operands,
/// and a residual add that cancels keeps that error while its result is small.
inline double compare_to_scale(const std::map<std::string, HostTensor>& got,
                               const std::map<std::string, HostTensor>& want, double rel) {
  double worst = 0;
  for (const auto& [name, w] : want) {
    double scale = 0;
    for (float v : w.to_f32())
      if (std::isfinite(v)) scale = std::max(scale, double(std::abs(v)));
    std::map<std::string, HostTensor> g1, w1;
    g1.emplace(name, got.at(name));
    w1.emplace(name, w);
    worst = std::max(worst, compare_outputs(g1, w1, rel * scale + 1e-6, 0));
  }
  return worst;
}

// Options for a test that counts what the search finds: a budget no host reaches, so that
// a loaded or sanitized machine does not cut the search short (the default 10 s did, under
// ASan in CI: the sm_90 decoder block gave 10 kernels, not 8, "time-limit (extraction)").
inline CompileOptions unhurried() {
  CompileOptions o;
  o.time_budget_seconds = 600;
  return o;
}

/// Compiles `g` for the reference target and runs it and the interpreter on the same
/// random inputs; returns the compiled program (its report and plan) and the error ratio.
struct Validation {
  compiler::CompiledProgram program;
  double error = 0;  ///< <= 1: within tolerance
};
inline Validation validate(const Graph& g, const CompileOptions& opt = {}, uint64_t seed = 1) {
  Validation v;
  v.program = compiler::compile_graph(*g.impl(), Target::reference(), opt);
  auto inputs = random_inputs(*g.impl(), seed);
  std::map<std::string, const HostTensor*> ptrs;
  for (const auto& [k, t] : inputs) ptrs.emplace(k, &t);
  auto want = detail::reference::run(*g.impl(), {}, ptrs);
  auto got = v.program.exe->run({}, ptrs);
  v.error = compare_outputs(got, want);
  return v;
}

/// The small graphs of the translation-validation suite, one per op family; every
/// target's test runs them (tests/compiler on reference, tests/gpu on the emulator).
struct TranslationCase {
  const char* name;
  std::function<void(Graph&)> build;
};

inline std::vector<TranslationCase> translation_cases() {
  return {
      {"elementwise chain",
       [](Graph& g) {
         Tensor x = g.input("x", {4, 6});
         g.output("y", sigmoid(exp(x) * 0.5f + sin(x) - sqrt(abs(x) + 1.f)) / (tanh(x) + 2.f));
       }},
      {"gelu and silu",
       [](Graph& g) {
         Tensor x = g.input("x", {3, 5});
         g.output("a", gelu(x));
         g.output("b", silu(x) + gelu_erf(x));
       }},
      {"reductions over axes",
       [](Graph& g) {
         Tensor x = g.input("x", {3, 4, 5});
         g.output("s", sum(x, 1));
         g.output("m", max(x, {0, 2}));
         g.output("mean", mean(x, -1, true) * 2.f);
         g.output("var", var(x, 2));
       }},
      {"softmax / log_softmax / layer_norm",
       [](Graph& g) {
         Tensor x = g.input("x", {4, 7});
         g.output("sm", softmax(x));
         g.output("lsm", log_softmax(x, 0));
         g.output("ln", layer_norm(x, g.param("w", {7}), g.param("b", {7})));
       }},
      {"matmul batched and transposed",
       [](Graph& g) {
         Tensor a = g.input("a", {2, 3, 4});
         Tensor b = g.input("b", {2, 5, 4});
         g.output("c", matmul(a, transpose(b, 1, 2)));
         g.output("d", matmul(g.input("v", {4}), g.param("w", {4, 6})));
       }},
      {"movement",
       [](Graph& g) {
         Tensor x = g.input("x", {2, 3, 4});
         Tensor y = concat({slice(x, 2, 1, 4), permute(pad(x, {{0, 0}, {0, 0}, {1, 1}}), {0, 1, 2})}, 2);
         g.output("y", y * 2.f);
         g.output("t", flatten(transpose(x, 0, 2)) + 1.f);
         g.output("e", expand(reshape(sum(x, 2), {2, 3, 1}), {2, 3, 5}) - 1.f);
       }},
      {"comparisons, where, casts",
       [](Graph& g) {
         Tensor x = g.input("x", {5, 4});
         Tensor y = g.input("y", {5, 4});
         g.output("lt", less(x, y));
         g.output("w", where(greater_equal(x, 0.f), x, y * 3.f));
         g.output("i", argmax(x, 1));
         g.output("h", cast(cast(x, f16) * 2.f, f32));
       }},
      {"embedding, cumsum, clamp",
       [](Graph& g) {
         Tensor t = g.param("table", {10, 4});
         Tensor ids = g.input("ids", {3, 2}, i32);
         g.output("e", embedding(t, ids) * 2.f);
         g.output("c", cumsum(g.input("x", {3, 5}), 1));
         g.output("k", clamp(g.input("z", {6}), -0.5f, 0.25f));
       }},
      {"conv2d and pooling",
       [](Graph& g) {
         Tensor x = g.input("x", {1, 2, 6, 6});
         Tensor y = conv2d(x, g.param("w", {3, 2, 3, 3}), g.param("b", {3}), {1, 1}, {1, 1});
         g.output("y", relu(y));
         g.output("p", max_pool2d(x, {2, 2}));
       }},
  };
}

/// Plan steps of kernel kind `k` (attention kernels, collectives) in a compiled program.
inline int count_kind(const compiler::CompiledProgram& p, ir::KernelKind k) {
  int n = 0;
  for (const auto& st : p.plan->steps) n += st.spec->kind == k ? 1 : 0;
  return n;
}

}  // namespace luminal::test
