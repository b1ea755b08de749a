// A Llama-family decoder (Hugging Face LlamaForCausalLM) written with Luminal's public API
// only: the checkpoint's config and weights, the prefill and decode graphs, and a session
// holding the compiled graphs and the KV cache.
//
// Semantics follow transformers' modeling_llama exactly: RMSNorm (x * rsqrt(mean(x^2) +
// eps) * w), rotate-half RoPE with inv_freq = theta^(-2i/head_dim), grouped-query
// attention (query head h reads KV head h / (heads / kv_heads)), causal softmax attention
// scaled by 1/sqrt(head_dim), SwiGLU MLP (down(silu(gate(x)) * up(x))), residuals around
// both, a final RMSNorm and lm_head (or the embedding table when tie_word_embeddings).
// Weights stay in the dtype they are stored in (f32, f16 or bf16); activations and every
// accumulation are f32 (a weight is converted as it is read); the KV cache is f32 unless
// the session asks for f16 or bf16.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "llama_config.hpp"
#include "luminal/luminal.hpp"

namespace llama {

namespace lm = luminal;

/// Hugging Face tensor names.
std::string layer_weight(int64_t layer, const std::string& suffix);  // "model.layers.N.<suffix>"
inline const char* kEmbed = "model.embed_tokens.weight";
inline const char* kFinalNorm = "model.norm.weight";
inline const char* kLmHead = "lm_head.weight";

/// The names and shapes ([out, in] for projections) a checkpoint of `c` must hold.
std::vector<std::pair<std::string, std::vector<int64_t>>> expected_weights(const Config& c);

using Progress = std::function<void(const std::string&)>;

class Model {
 public:
  /// Checks every expected weight is present with its shape and a float dtype (extra
  /// tensors, e.g. rotary tables of old checkpoints, are ignored; lm_head.weight is
  /// ignored when the embeddings are tied).
  Model(Config config, std::map<std::string, lm::HostTensor> weights);
  /// DIR/config.json and DIR's weights (model.safetensors or the sharded index).
  /// `placement`: lm::LoadOptions{.huge_pages = true} copies the weights into huge
  /// pages (what decode wants: it streams them all every token); default, zero-copy views
  /// of the file mapping (a tensor-parallel rank binds only its shards from the file).
  static Model load(const std::string& dir, const Progress& progress = {}, const lm::LoadOptions& placement = {});

  const Config& config() const { return config_; }
  const std::map<std::string, lm::HostTensor>& weights() const { return weights_; }
  /// "f32", "f16", "bf16" or "mixed".
  std::string weight_dtype() const;
  int64_t weight_bytes() const;
  /// The weights' safetensors path (file, index or folder) when loaded from one, else "".
  const std::string& source() const { return source_; }

  /// Prefill of S tokens from position 0 (S a symbolic dim in [1, max_position_embeddings]):
  /// inputs "tokens" i32 [S]; outputs "logits" f32 [1, vocab] (last position) and, per
  /// layer l, "k.l" / "v.l" [S, kv_heads, head_dim] in the cache's dtype `kv` (f32, f16 or
  /// bf16; keys after RoPE).
  lm::Graph prefill_graph(lm::DType kv = lm::f32) const;
  /// One token at position P, with P cached tokens before it (P a symbolic dim in
  /// [1, max_position_embeddings - 1]): inputs "tokens" i32 [1] and per layer
  /// "k_cache.l" / "v_cache.l" [P, kv_heads, head_dim] in dtype `kv`; outputs "logits" f32
  /// [1, vocab], "k.l" / "v.l" [1, kv_heads, head_dim] in dtype `kv`. With a half cache the
  /// step attends over the new row as the cache will hold it (rounded).
  lm::Graph decode_graph(lm::DType kv = lm::f32) const;

 private:
  Config config_;
  std::map<std::string, lm::HostTensor> weights_;
  std::string source_;
};

/// Compiled prefill and decode graphs with their KV cache.
///
/// The cache is one time-major buffer per layer and per k/v, [capacity, kv_heads,
/// head_dim]: its first P rows are exactly the [P, kv_heads, head_dim] tensor the decode
/// graph reads, so each step passes views of it (no copy), and the step's new row is an
/// output written by the kernels straight into row P of the same buffer (Callable::run
/// fills writable output views in place). Nothing is copied or reallocated per step.
class Session {
 public:
  /// Compiles both graphs for `target` (each once: the lengths are symbolic) and binds
  /// the weights (views of the mapped file are bound without a copy). `kv_dtype`: the KV
  /// cache's element type (f16 halves its memory and the decode step's attention reads,
  /// as llama.cpp's default cache does; activations and accumulation stay f32).
  Session(const Model& model, lm::Target target, lm::CompileOptions options = {},
          const Progress& progress = {}, lm::DType kv_dtype = lm::f32);

  /// Empties the cache and makes room for `capacity` tokens (prompt + generated).
  void reset(int64_t capacity);
  /// Runs the prompt (the cache must be empty); returns the last position's logits.
  std::span<const float> prefill(std::span<const int32_t> tokens);
  /// Appends one token; returns its logits.
  std::span<const float> decode(int32_t token);
  int64_t length() const { return length_; }
  int64_t capacity() const { return capacity_; }
  int64_t cache_bytes() const;
  lm::DType kv_dtype() const { return kv_dtype_; }

  const lm::Callable& prefill_fn() const { return prefill_; }
  const lm::Callable& decode_fn() const { return decode_; }
  double compile_seconds() const { return compile_seconds_; }

 private:
  void run(const lm::Callable& fn, std::map<std::string, lm::HostTensor>& inputs,
           std::map<std::string, lm::HostTensor>& outputs);
  Config config_;
  lm::Callable prefill_, decode_;
  double compile_seconds_ = 0;
  lm::DType kv_dtype_ = lm::f32;
  int64_t capacity_ = 0, length_ = 0;
  std::vector<std::unique_ptr<std::byte[]>> k_, v_;  // per layer, [capacity, kv_heads, head_dim]
  std::vector<float> logits_;
};

/// "f32", "f16" or "bf16" as a KV-cache dtype; anything else is an error naming it.
lm::DType kv_dtype_from_name(const std::string& name);

/// Greedy choice: the first index of the largest logit (torch.argmax's tie rule).
int32_t argmax(std::span<const float> logits);

}  // namespace llama
