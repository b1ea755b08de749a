// The model configuration of a Hugging Face LlamaForCausalLM checkpoint (config.json).
#pragma once

#include <cstdint>
#include <string>

namespace llama {

struct Config {
  int64_t hidden_size = 0;
  int64_t intermediate_size = 0;
  int64_t num_attention_heads = 0;
  int64_t num_key_value_heads = 0;  // defaults to num_attention_heads
  int64_t num_hidden_layers = 0;
  int64_t vocab_size = 0;
  int64_t max_position_embeddings = 2048;
  int64_t head_dim = 0;  // defaults to hidden_size / num_attention_heads
  double rms_norm_eps = 1e-6;
  double rope_theta = 10000.0;
  bool tie_word_embeddings = false;

  /// Reads and checks `path` (config.json). Keys the model does not implement with a
  /// non-default value (rope_scaling, attention or MLP biases, an activation other
  /// than SiLU, a model_type other than llama) are errors, never silently ignored.
  static Config from_file(const std::string& path);
  /// The same from JSON text; `what` names the source in errors.
  static Config from_json(const std::string& text, const std::string& what);
  /// config.json text for this configuration (what tools/make-llama writes).
  std::string to_json() const;

  int64_t q_dim() const { return num_attention_heads * head_dim; }
  int64_t kv_dim() const { return num_key_value_heads * head_dim; }
  /// Parameters of the whole model (embeddings, every layer, final norm, head unless tied).
  int64_t parameter_count() const;
  std::string summary() const;
};

}  // namespace llama
