// The Llama graphs and the KV-cache session (see llama_model.hpp).
#include "llama_model.hpp"

#include <chrono>
#include <filesystem>
#include <stdexcept>

namespace llama {

namespace {

std::string shape_text(const std::vector<int64_t>& s) {
  std::string t = "(";
  for (size_t i = 0; i < s.size(); ++i) t += (i ? ", " : "") + std::to_string(s[i]);
  return t + ")";
}

void check_kv_dtype(lm::DType d) {
  if (!lm::is_float(d))
    throw std::runtime_error("[llama] KV cache dtype " + std::string(lm::dtype_name(d)) +
                             ": not f32, f16 or bf16");
}

/// The graph of one model: prefill (decode = false) or one decode step.
class Builder {
 public:
  Builder(const Config& c, const std::map<std::string, lm::HostTensor>& w, bool decode, lm::DType kv)
      : c_(c), w_(w), decode_(decode), kv_(kv) {}

  lm::Graph build() {
    const int64_t KV = c_.num_key_value_heads, hd = c_.head_dim, max = c_.max_position_embeddings;
    lm::Tensor ids, pos;
    if (decode_) {
      P_ = g_.dim("P", 1, max - 1);
      S_ = lm::Dim(1);
      ids = g_.input("tokens", {1}, lm::i32);
      // The new token's position is P: the last entry of 0..P (one source of truth: the
      // cache length the call binds).
      pos = lm::slice(lm::arange(P_ + 1), 0, P_, P_ + 1);
    } else {
      S_ = g_.dim("S", 1, max);
      ids = g_.input("tokens", {S_}, lm::i32);
      pos = lm::arange(S_);
    }
    lm::Tensor h = f32(lm::embedding(param(kEmbed), ids));  // [S, d]
    for (int64_t l = 0; l < c_.num_hidden_layers; ++l) {
      lm::Tensor kc, vc;
      if (decode_) {
        kc = g_.input("k_cache." + std::to_string(l), {P_, KV, hd}, kv_);
        vc = g_.input("v_cache." + std::to_string(l), {P_, KV, hd}, kv_);
      }
      h = layer(l, h, pos, kc, vc);
    }
    // Only the last position's logits are needed (greedy decoding); the norm is per row.
    lm::Tensor last = decode_ ? h : lm::slice(h, 0, S_ - 1, S_);
    last = lm::rms_norm(last, f32(param(kFinalNorm)), eps());
    const char* head = c_.tie_word_embeddings ? kEmbed : kLmHead;
    g_.output("logits", lm::linear(last, f32(param(head))));
    return std::move(g_);
  }

 private:
  float eps() const { return static_cast<float>(c_.rms_norm_eps); }

  lm::Tensor param(const std::string& name) {
    auto it = params_.find(name);
    if (it != params_.end()) return it->second;
    const lm::HostTensor& t = w_.at(name);
    std::vector<lm::Dim> shape(t.shape().begin(), t.shape().end());
    return params_[name] = g_.param(name, shape, t.dtype());
  }
  static lm::Tensor f32(const lm::Tensor& t) { return t.dtype() == lm::f32 ? t : lm::cast(t, lm::f32); }
  lm::Tensor to_kv(const lm::Tensor& t) const { return kv_ == lm::f32 ? t : lm::cast(t, kv_); }
  lm::Tensor proj(const lm::Tensor& x, int64_t l, const std::string& name) {
    return lm::linear(x, f32(param(layer_weight(l, name))));
  }

  /// kv [T, KV, hd] -> [H, T, hd], KV head j repeated for query heads j*G .. j*G+G-1.
  lm::Tensor repeat_kv(const lm::Tensor& t, const lm::Dim& T) const {
    const int64_t H = c_.num_attention_heads, KV = c_.num_key_value_heads, G = H / KV, hd = c_.head_dim;
    lm::Tensor hm = lm::permute(t, {1, 0, 2});  // [KV, T, hd]
    if (G == 1) return hm;
    return lm::reshape(lm::expand(lm::reshape(hm, {KV, 1, T, hd}), {KV, G, T, hd}), {H, T, hd});
  }

  lm::Tensor layer(int64_t l, const lm::Tensor& h, const lm::Tensor& pos, const lm::Tensor& kc,
                   const lm::Tensor& vc) {
    const int64_t H = c_.num_attention_heads, KV = c_.num_key_value_heads, hd = c_.head_dim;
    const float theta = static_cast<float>(c_.rope_theta);
    const std::string ls = std::to_string(l);
    lm::Tensor x = lm::rms_norm(h, f32(param(layer_weight(l, "input_layernorm.weight"))), eps());
    lm::Tensor q = lm::permute(lm::reshape(proj(x, l, "self_attn.q_proj.weight"), {S_, H, hd}), {1, 0, 2});
    lm::Tensor k = lm::permute(lm::reshape(proj(x, l, "self_attn.k_proj.weight"), {S_, KV, hd}), {1, 0, 2});
    lm::Tensor v = lm::reshape(proj(x, l, "self_attn.v_proj.weight"), {S_, KV, hd});
    q = lm::rope(q, pos, theta);                          // [H, S, hd]
    lm::Tensor k_new = lm::permute(lm::rope(k, pos, theta), {1, 0, 2});  // [S, KV, hd]
    // The rows the cache keeps, in its dtype. A decode step attends over them as
    // stored (an f16 cache: the new row rounded like the cached ones, so a step's
    // attention is the same whichever step computed a row); the prompt attends over its
    // own rows in f32.
    const lm::Tensor k_row = to_kv(k_new), v_row = to_kv(v);
    g_.output("k." + ls, k_row);
    g_.output("v." + ls, v_row);
    lm::Tensor keys = k_new, values = v;
    lm::Dim T = S_;
    if (decode_) {
      // Each piece widened, then joined (not the join widened): a concat of stored
      // buffers read through a widening cast is what the attention kernel reads in place.
      keys = lm::concat({f32(kc), f32(k_row)}, 0);  // [P + 1, KV, hd]
      values = lm::concat({f32(vc), f32(v_row)}, 0);
      T = P_ + 1;
    }
    // Decode: the one query sees every key. Prefill: causal over the prompt.
    lm::Tensor a = lm::scaled_dot_product_attention(q, repeat_kv(keys, T), repeat_kv(values, T), !decode_);
    a = lm::reshape(lm::permute(a, {1, 0, 2}), {S_, H * hd});
    lm::Tensor h2 = h + proj(a, l, "self_attn.o_proj.weight");
    lm::Tensor y = lm::rms_norm(h2, f32(param(layer_weight(l, "post_attention_layernorm.weight"))), eps());
    lm::Tensor mlp = proj(lm::silu(proj(y, l, "mlp.gate_proj.weight")) * proj(y, l, "mlp.up_proj.weight"), l,
                          "mlp.down_proj.weight");
    return h2 + mlp;
  }

  const Config& c_;
  const std::map<std::string, lm::HostTensor>& w_;
  bool decode_;
  lm::DType kv_;  // the KV cache's dtype
  lm::Graph g_;
  lm::Dim S_ = lm::Dim(1), P_ = lm::Dim(1);
  std::map<std::string, lm::Tensor> params_;
};

}  // namespace

std::string layer_weight(int64_t layer, const std::string& suffix) {
  return "model.layers." + std::to_string(layer) + "." + suffix;
}

std::vector<std::pair<std::string, std::vector<int64_t>>> expected_weights(const Config& c) {
  const int64_t d = c.hidden_size, f = c.intermediate_size;
  std::vector<std::pair<std::string, std::vector<int64_t>>> out;
  out.push_back({kEmbed, {c.vocab_size, d}});
  for (int64_t l = 0; l < c.num_hidden_layers; ++l) {
    out.push_back({layer_weight(l, "input_layernorm.weight"), {d}});
    out.push_back({layer_weight(l, "self_attn.q_proj.weight"), {c.q_dim(), d}});
    out.push_back({layer_weight(l, "self_attn.k_proj.weight"), {c.kv_dim(), d}});
    out.push_back({layer_weight(l, "self_attn.v_proj.weight"), {c.kv_dim(), d}});
    out.push_back({layer_weight(l, "self_attn.o_proj.weight"), {d, c.q_dim()}});
    out.push_back({layer_weight(l, "post_attention_layernorm.weight"), {d}});
    out.push_back({layer_weight(l, "mlp.gate_proj.weight"), {f, d}});
    out.push_back({layer_weight(l, "mlp.up_proj.weight"), {f, d}});
    out.push_back({layer_weight(l, "mlp.down_proj.weight"), {d, f}});
  }
  out.push_back({kFinalNorm, {d}});
  if (!c.tie_word_embeddings) out.push_back({kLmHead, {c.vocab_size, d}});
  return out;
}

Model::Model(Config config, std::map<std::string, lm::HostTensor> weights) : config_(std::move(config)) {
  for (const auto& [name, shape] : expected_weights(config_)) {
    auto it = weights.find(name);
    if (it == weights.end()) throw std::runtime_error("[llama] the checkpoint has no tensor '" + name + "'");
    const lm::HostTensor& t = it->second;
    if (t.shape() != shape)
      throw std::runtime_error("[llama] '" + name + "' has shape " + shape_text(t.shape()) + ", the config needs " +
                               shape_text(shape));
    if (!lm::is_float(t.dtype()))
      throw std::runtime_error("[llama] '" + name + "' is " + std::string(lm::dtype_name(t.dtype())) +
                               ", not f32, f16 or bf16");
    weights_.emplace(name, t);
  }
}

Model Model::load(const std::string& dir, const Progress& progress, const lm::LoadOptions& placement) {
  namespace fs = std::filesystem;
  Config c = Config::from_file((fs::path(dir) / "config.json").string());
  if (progress) progress("loading " + c.summary() + (placement.huge_pages ? " into huge pages" : ""));
  Model m(c, lm::load_safetensors(dir, placement));
  m.source_ = dir;
  return m;
}

std::string Model::weight_dtype() const {
  std::string d;
  for (const auto& [name, t] : weights_) {
    const std::string n(lm::dtype_name(t.dtype()));
    if (d.empty()) d = n;
    if (d != n) return "mixed";
  }
  return d;
}

int64_t Model::weight_bytes() const {
  int64_t n = 0;
  for (const auto& [name, t] : weights_) n += static_cast<int64_t>(t.nbytes());
  return n;
}

lm::Graph Model::prefill_graph(lm::DType kv) const {
  check_kv_dtype(kv);
  return Builder(config_, weights_, false, kv).build();
}
lm::Graph Model::decode_graph(lm::DType kv) const {
  check_kv_dtype(kv);
  return Builder(config_, weights_, true, kv).build();
}

Session::Session(const Model& model, lm::Target target, lm::CompileOptions options, const Progress& progress,
                 lm::DType kv_dtype)
    : config_(model.config()), kv_dtype_(kv_dtype) {
  const auto t0 = std::chrono::steady_clock::now();
  if (progress) progress("compiling prefill for " + target.to_string());
  prefill_ = lm::compile(model.prefill_graph(kv_dtype), target, options);
  if (progress) progress("compiling decode for " + target.to_string());
  decode_ = lm::compile(model.decode_graph(kv_dtype), target, options);
  compile_seconds_ = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  // One rank of a tensor-parallel job binds only its shard of each split weight, read
  // from the file (shared by both programs); a whole-weight bind would copy the shard out
  // per program. One process binds views of the mapped file.
  lm::Callable* fns[] = {&prefill_, &decode_};
  if (options.communicator && !model.source().empty()) {
    lm::bind_safetensors(std::span<lm::Callable* const>(fns), model.source());
  } else {
    for (lm::Callable* fn : fns)
      for (const std::string& name : fn->param_names()) fn->bind(name, model.weights().at(name));
  }
  logits_.resize(static_cast<size_t>(config_.vocab_size));
}

void Session::reset(int64_t capacity) {
  if (capacity < 1 || capacity > config_.max_position_embeddings)
    throw std::runtime_error("[llama] capacity " + std::to_string(capacity) + " outside [1, " +
                             std::to_string(config_.max_position_embeddings) + "] (max_position_embeddings)");
  const size_t n = static_cast<size_t>(capacity * config_.kv_dim()) * lm::dtype_size(kv_dtype_);
  if (capacity != capacity_) {
    k_.clear();
    v_.clear();
    // Not zero-filled: every row is written (by the kernels) before it is read, and the
    // pages of rows not yet reached are never touched.
    for (int64_t l = 0; l < config_.num_hidden_layers; ++l) {
      k_.emplace_back(new std::byte[n]);
      v_.emplace_back(new std::byte[n]);
    }
    capacity_ = capacity;
  }
  length_ = 0;
}

int64_t Session::cache_bytes() const {
  return 2 * config_.num_hidden_layers * capacity_ * config_.kv_dim() *
         static_cast<int64_t>(lm::dtype_size(kv_dtype_));
}

void Session::run(const lm::Callable& fn, std::map<std::string, lm::HostTensor>& inputs,
                  std::map<std::string, lm::HostTensor>& outputs) {
  const lm::Status st = fn.run(inputs, outputs);
  if (!st) throw std::runtime_error("[llama] " + st.message);
}

std::span<const float> Session::prefill(std::span<const int32_t> tokens) {
  const int64_t S = static_cast<int64_t>(tokens.size()), KV = config_.num_key_value_heads, hd = config_.head_dim;
  if (capacity_ == 0) throw std::runtime_error("[llama] reset(capacity) before prefill");
  if (length_ != 0) throw std::runtime_error("[llama] prefill needs an empty cache (reset first)");
  if (S < 1 || S > capacity_)
    throw std::runtime_error("[llama] prompt of " + std::to_string(S) + " tokens; the cache holds " +
                             std::to_string(capacity_));
  std::map<std::string, lm::HostTensor> in, out;
  in.emplace("tokens", lm::HostTensor::view(lm::i32, {S}, tokens.data()));
  out.emplace("logits", lm::HostTensor::view(lm::f32, {1, config_.vocab_size}, logits_.data()));
  for (int64_t l = 0; l < config_.num_hidden_layers; ++l) {
    const std::string ls = std::to_string(l);
    out.emplace("k." + ls, lm::HostTensor::view(kv_dtype_, {S, KV, hd}, static_cast<void*>(k_[l].get())));
    out.emplace("v." + ls, lm::HostTensor::view(kv_dtype_, {S, KV, hd}, static_cast<void*>(v_[l].get())));
  }
  run(prefill_, in, out);
  length_ = S;
  return logits_;
}

std::span<const float> Session::decode(int32_t token) {
  const int64_t P = length_, KV = config_.num_key_value_heads, hd = config_.head_dim;
  if (P < 1) throw std::runtime_error("[llama] decode needs a prefilled cache");
  if (P >= capacity_) throw std::runtime_error("[llama] the KV cache is full (" + std::to_string(P) + " tokens)");
  std::map<std::string, lm::HostTensor> in, out;
  in.emplace("tokens", lm::HostTensor::view(lm::i32, {1}, &token));
  out.emplace("logits", lm::HostTensor::view(lm::f32, {1, config_.vocab_size}, logits_.data()));
  const int64_t row = KV * hd * static_cast<int64_t>(lm::dtype_size(kv_dtype_));  // bytes
  const lm::DType dt = kv_dtype_;
  for (int64_t l = 0; l < config_.num_hidden_layers; ++l) {
    const std::string ls = std::to_string(l);
    std::byte* k = k_[l].get();
    std::byte* v = v_[l].get();
    in.emplace("k_cache." + ls, lm::HostTensor::view(dt, {P, KV, hd}, static_cast<const void*>(k)));
    in.emplace("v_cache." + ls, lm::HostTensor::view(dt, {P, KV, hd}, static_cast<const void*>(v)));
    out.emplace("k." + ls, lm::HostTensor::view(dt, {1, KV, hd}, static_cast<void*>(k + P * row)));
    out.emplace("v." + ls, lm::HostTensor::view(dt, {1, KV, hd}, static_cast<void*>(v + P * row)));
  }
  run(decode_, in, out);
  length_ = P + 1;
  return logits_;
}

lm::DType kv_dtype_from_name(const std::string& name) {
  for (lm::DType d : {lm::f32, lm::f16, lm::bf16})
    if (name == lm::dtype_name(d)) return d;
  throw std::runtime_error("[llama] KV cache dtype '" + name + "': not f32, f16 or bf16");
}

int32_t argmax(std::span<const float> logits) {
  int32_t best = 0;
  for (size_t i = 1; i < logits.size(); ++i)
    if (logits[i] > logits[static_cast<size_t>(best)]) best = static_cast<int32_t>(i);
  return best;
}

}  // namespace llama
