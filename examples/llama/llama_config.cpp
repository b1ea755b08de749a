// config.json parsing with the defaults of transformers' LlamaConfig.
#include "llama_config.hpp"

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <stdexcept>

namespace llama {

namespace {
using json = nlohmann::json;

[[noreturn]] void fail(const std::string& what, const std::string& msg) {
  throw std::runtime_error("[llama config] " + what + ": " + msg);
}

int64_t positive_int(const json& j, const char* key, const std::string& what, bool required, int64_t fallback) {
  if (!j.contains(key) || j.at(key).is_null()) {
    if (required) fail(what, std::string("missing \"") + key + "\"");
    return fallback;
  }
  const json& v = j.at(key);
  if (!v.is_number_integer() || v.get<int64_t>() <= 0)
    fail(what, std::string("\"") + key + "\" must be a positive integer, got " + v.dump());
  return v.get<int64_t>();
}

double positive_number(const json& j, const char* key, const std::string& what, double fallback) {
  if (!j.contains(key) || j.at(key).is_null()) return fallback;
  const json& v = j.at(key);
  if (!v.is_number() || v.get<double>() <= 0)
    fail(what, std::string("\"") + key + "\" must be a positive number, got " + v.dump());
  return v.get<double>();
}
}  // namespace

Config Config::from_file(const std::string& path) {
  std::ifstream f(path);
  if (!f) fail(path, "cannot open");
  std::ostringstream ss;
  ss << f.rdbuf();
  return from_json(ss.str(), path);
}

Config Config::from_json(const std::string& text, const std::string& what) {
  json j;
  try {
    j = json::parse(text);
  } catch (const json::exception& e) {
    fail(what, std::string("not valid JSON: ") + e.what());
  }
  if (!j.is_object()) fail(what, "not a JSON object");
  if (j.contains("model_type") && j.at("model_type") != "llama")
    fail(what, "model_type " + j.at("model_type").dump() + " is not \"llama\"");
  if (j.contains("hidden_act") && j.at("hidden_act") != "silu")
    fail(what, "hidden_act " + j.at("hidden_act").dump() + " is not supported (only \"silu\")");
  if (j.contains("rope_scaling") && !j.at("rope_scaling").is_null())
    fail(what, "rope_scaling " + j.at("rope_scaling").dump() + " is not supported (only plain RoPE)");
  for (const char* bias : {"attention_bias", "mlp_bias"})
    if (j.contains(bias) && j.at(bias) == true) fail(what, std::string(bias) + " = true is not supported");

  Config c;
  c.hidden_size = positive_int(j, "hidden_size", what, true, 0);
  c.intermediate_size = positive_int(j, "intermediate_size", what, true, 0);
  c.num_attention_heads = positive_int(j, "num_attention_heads", what, true, 0);
  c.num_hidden_layers = positive_int(j, "num_hidden_layers", what, true, 0);
  c.vocab_size = positive_int(j, "vocab_size", what, true, 0);
  c.num_key_value_heads = positive_int(j, "num_key_value_heads", what, false, c.num_attention_heads);
  c.max_position_embeddings = positive_int(j, "max_position_embeddings", what, false, 2048);
  if (c.hidden_size % c.num_attention_heads != 0 && !(j.contains("head_dim") && !j.at("head_dim").is_null()))
    fail(what, "hidden_size is not a multiple of num_attention_heads and there is no head_dim");
  c.head_dim = positive_int(j, "head_dim", what, false, c.hidden_size / c.num_attention_heads);
  if (c.head_dim % 2 != 0) fail(what, "head_dim " + std::to_string(c.head_dim) + " must be even (RoPE)");
  if (c.num_attention_heads % c.num_key_value_heads != 0)
    fail(what, "num_attention_heads " + std::to_string(c.num_attention_heads) +
                   " is not a multiple of num_key_value_heads " + std::to_string(c.num_key_value_heads));
  c.rms_norm_eps = positive_number(j, "rms_norm_eps", what, 1e-6);
  c.rope_theta = positive_number(j, "rope_theta", what, 10000.0);
  if (j.contains("tie_word_embeddings") && !j.at("tie_word_embeddings").is_null()) {
    if (!j.at("tie_word_embeddings").is_boolean()) fail(what, "\"tie_word_embeddings\" must be true or false");
    c.tie_word_embeddings = j.at("tie_word_embeddings").get<bool>();
  }
  return c;
}

std::string Config::to_json() const {
  json j = {{"architectures", {"LlamaForCausalLM"}},
            {"model_type", "llama"},
            {"hidden_act", "silu"},
            {"hidden_size", hidden_size},
            {"intermediate_size", intermediate_size},
            {"num_attention_heads", num_attention_heads},
            {"num_key_value_heads", num_key_value_heads},
            {"num_hidden_layers", num_hidden_layers},
            {"head_dim", head_dim},
            {"vocab_size", vocab_size},
            {"max_position_embeddings", max_position_embeddings},
            {"rms_norm_eps", rms_norm_eps},
            {"rope_theta", rope_theta},
            {"rope_scaling", nullptr},
            {"attention_bias", false},
            {"mlp_bias", false},
            {"tie_word_embeddings", tie_word_embeddings},
            {"bos_token_id", 1},
            {"eos_token_id", 2}};
  return j.dump(2) + "\n";
}

int64_t Config::parameter_count() const {
  const int64_t d = hidden_size;
  const int64_t layer = d * q_dim() + 2 * d * kv_dim() + q_dim() * d + 3 * d * intermediate_size + 2 * d;
  return vocab_size * d * (tie_word_embeddings ? 1 : 2) + num_hidden_layers * layer + d;
}

std::string Config::summary() const {
  std::ostringstream s;
  s << "llama d_model " << hidden_size << ", " << num_hidden_layers << " layers, " << num_attention_heads
    << " heads (" << num_key_value_heads << " KV, head_dim " << head_dim << "), FFN " << intermediate_size
    << ", vocab " << vocab_size << (tie_word_embeddings ? ", tied embeddings" : "") << ", "
    << parameter_count() / 1000000.0 << "M parameters";
  return s.str();
}

}  // namespace llama
