// The Llama example end to end: committed random-weight checkpoints in the Hugging Face
// layout (tests/data/llama/*, written by tools/make-llama) run through the prefill and
// decode graphs with the KV cache, on the reference and CPU targets. Every step's logits
// must match those of our PyTorch implementation (tools/make-llama/reference.py: no KV
// cache, the whole sequence recomputed per step), and the greedy ids must be identical.
//
// Models: "tiny" (f32, 2 layers, GQA 4:2, untied), "tiny-f16-tied" (f16, GQA 4:1,
// head_dim 24 != hidden/heads, tied embeddings, two shards + index), "tiny-bf16" (bf16,
// one layer, rope_theta 500000).
#include <catch2/catch.hpp>

#include <cmath>
#include <string>

#include "llama_model.hpp"
#include "luminal/luminal.hpp"

namespace lm = luminal;

namespace {

std::string model_dir(const std::string& name) {
  return std::string(LUMINAL_TEST_DATA_DIR) + "/llama/" + name;
}

void check_against_reference(const std::string& name, const lm::Target& target) {
  INFO("model " << name << " on " << target.to_string());
  const llama::Model model = llama::Model::load(model_dir(name));
  const auto ref = lm::load_safetensors(model_dir(name) + "/reference.safetensors");
  const auto prompt = ref.at("prompt").values<int32_t>();
  const auto tokens = ref.at("tokens").values<int32_t>();
  const lm::HostTensor& logits = ref.at("logits");
  const int64_t steps = logits.shape()[0], V = logits.shape()[1];
  REQUIRE(V == model.config().vocab_size);
  REQUIRE(steps == 17);  // prefill + 16 decode steps

  llama::Session session(model, target);
  session.reset(static_cast<int64_t>(prompt.size()) + steps);
  std::span<const float> got = session.prefill(std::vector<int32_t>(prompt.begin(), prompt.end()));
  for (int64_t s = 0; s < steps; ++s) {
    INFO("step " << s << " (0 = prefill)");
    const float* want = logits.values<float>().data() + s * V;
    double worst = 0, scale = 0;
    for (int64_t i = 0; i < V; ++i) {
      worst = std::max(worst, static_cast<double>(std::fabs(got[static_cast<size_t>(i)] - want[i])));
      scale = std::max(scale, static_cast<double>(std::fabs(want[i])));
    }
    INFO("largest |logit| " << scale << ", largest difference " << worst);
    CHECK(worst <= 2e-5 * std::max(1.0, scale));
    const int32_t next = llama::argmax(got);
    REQUIRE(next == tokens[static_cast<size_t>(s)]);
    if (s + 1 < steps) got = session.decode(next);
  }
  CHECK(session.length() == static_cast<int64_t>(prompt.size()) + steps - 1);
}

// Bytes of one of a session's caches (K or V) for `capacity` tokens.
int64_t config_bytes(const llama::Config& c, int64_t capacity, size_t elem) {
  return c.num_hidden_layers * capacity * c.kv_dim() * static_cast<int64_t>(elem);
}

}  // namespace

TEST_CASE("llama logits and greedy ids equal PyTorch's at every step", "[llama]") {
  for (const char* name : {"tiny", "tiny-f16-tied", "tiny-bf16"})
    for (const lm::Target& t : {lm::Target::reference(), lm::Target::cpu()}) check_against_reference(name, t);
}

TEST_CASE("the graphs keep the lengths symbolic and the weights in their stored dtype", "[llama]") {
  const llama::Model model = llama::Model::load(model_dir("tiny-f16-tied"));
  CHECK(model.weight_dtype() == "f16");
  const lm::Graph decode = model.decode_graph();
  llama::Session session(model, lm::Target::cpu());
  // One decode Callable serves every cache length: names and params as documented.
  const auto inputs = session.decode_fn().input_names();
  CHECK(std::find(inputs.begin(), inputs.end(), "k_cache.1") != inputs.end());
  const auto params = session.decode_fn().param_names();
  CHECK(std::find(params.begin(), params.end(), "lm_head.weight") == params.end());  // tied
  // The bound weights are the mapped file's views: nothing was copied to f32.
  CHECK(model.weights().at("model.embed_tokens.weight").has_owner());
}

TEST_CASE("an f16 or bf16 KV cache: rounded alike on the CPU and reference targets", "[llama]") {
  // The CPU's decode with a half cache follows the reference target's with the same cache
  // (both round each new row once, as it is stored, and attend over the stored rows), and
  // stays within the halves' rounding of PyTorch's f32 run -- visibly rounded: further
  // from it than an f32 cache is allowed to be (2e-5). The cache is half the bytes.
  const llama::Model model = llama::Model::load(model_dir("tiny"));
  const auto ref = lm::load_safetensors(model_dir("tiny") + "/reference.safetensors");
  const auto prompt = ref.at("prompt").values<int32_t>();
  const lm::HostTensor& torch_logits = ref.at("logits");
  const int64_t steps = torch_logits.shape()[0], V = torch_logits.shape()[1];
  for (lm::DType kv : {lm::f16, lm::bf16}) {
    INFO("KV cache " << lm::dtype_name(kv));
    llama::Session cpu(model, lm::Target::cpu(), {}, {}, kv),
        interp(model, lm::Target::reference(), {}, {}, kv);
    CHECK(cpu.kv_dtype() == kv);
    for (llama::Session* s : {&cpu, &interp}) s->reset(static_cast<int64_t>(prompt.size()) + steps);
    CHECK(cpu.cache_bytes() ==
          2 * config_bytes(model.config(), static_cast<int64_t>(prompt.size()) + steps, lm::dtype_size(kv)));
    const std::vector<int32_t> p(prompt.begin(), prompt.end());
    std::span<const float> a = cpu.prefill(p), b = interp.prefill(p);
    double rounded = 0;  // the largest difference from PyTorch over the steps, relative
    for (int64_t st = 0; st < steps; ++st) {
      INFO("step " << st << " (0 = prefill)");
      const float* torch = torch_logits.values<float>().data() + st * V;
      double same = 0, vs_torch = 0, scale = 0;
      for (int64_t i = 0; i < V; ++i) {
        const auto k = static_cast<size_t>(i);
        same = std::max(same, static_cast<double>(std::fabs(a[k] - b[k])));
        vs_torch = std::max(vs_torch, static_cast<double>(std::fabs(a[k] - torch[i])));
        scale = std::max(scale, static_cast<double>(std::fabs(torch[i])));
      }
      INFO("largest |logit| " << scale << ", cpu vs reference " << same << ", vs PyTorch (f32 cache) "
                              << vs_torch);
      // A new row rounds to the half from f32 values that differ by summation order
      // between the targets, so now and then one element lands one half-ulp apart.
      CHECK(same <= (kv == lm::bf16 ? 2e-3 : 3e-4) * std::max(1.0, scale));
      CHECK(vs_torch <= (kv == lm::bf16 ? 1e-2 : 1.5e-3) * std::max(1.0, scale));
      rounded = std::max(rounded, vs_torch / std::max(1.0, scale));
      const int32_t next = llama::argmax(a);
      REQUIRE(next == llama::argmax(b));
      if (st + 1 < steps) {
        a = cpu.decode(next);
        b = interp.decode(next);
      }
    }
    CHECK(rounded > 2e-5);
  }
  CHECK_THROWS_WITH(llama::Session(model, lm::Target::cpu(), {}, {}, lm::i32),
                    Catch::Contains("KV cache dtype"));
  CHECK(llama::kv_dtype_from_name("bf16") == lm::bf16);
  CHECK_THROWS_WITH(llama::kv_dtype_from_name("f64"), Catch::Contains("'f64'"));
}

TEST_CASE("the session refuses calls that do not fit its cache", "[llama]") {
  const llama::Model model = llama::Model::load(model_dir("tiny-bf16"));
  llama::Session session(model, lm::Target::cpu());
  CHECK_THROWS_WITH(session.prefill(std::vector<int32_t>{1}), Catch::Contains("reset(capacity)"));
  session.reset(3);
  CHECK_THROWS_WITH(session.decode(1), Catch::Contains("prefilled"));
  CHECK_THROWS_WITH(session.prefill(std::vector<int32_t>{1, 2, 3, 4}), Catch::Contains("holds 3"));
  (void)session.prefill(std::vector<int32_t>{1, 2});
  (void)session.decode(3);
  CHECK_THROWS_WITH(session.decode(4), Catch::Contains("full"));
  // An out-of-vocabulary id is the embedding's RuntimeError, and the session stays usable.
  session.reset(3);
  CHECK_THROWS_WITH(session.prefill(std::vector<int32_t>{1, 100000}), Catch::Contains("embedding"));
  CHECK_THROWS_WITH(session.reset(1000), Catch::Contains("max_position_embeddings"));
}

TEST_CASE("config.json: defaults, and what the model does not implement is an error", "[llama]") {
  const std::string base = R"({"hidden_size":64,"intermediate_size":128,"num_attention_heads":4,)"
                           R"("num_hidden_layers":1,"vocab_size":32)";
  const llama::Config c = llama::Config::from_json(base + "}", "cfg");
  CHECK(c.num_key_value_heads == 4);
  CHECK(c.head_dim == 16);
  CHECK(c.rope_theta == 10000.0);
  CHECK(c.rms_norm_eps == 1e-6);
  CHECK_FALSE(c.tie_word_embeddings);
  CHECK(llama::Config::from_json(base + R"(,"head_dim":32,"num_key_value_heads":2})", "cfg").head_dim == 32);
  CHECK_THROWS_WITH(llama::Config::from_json(base + R"(,"rope_scaling":{"type":"llama3"}})", "cfg"),
                    Catch::Contains("rope_scaling"));
  CHECK_THROWS_WITH(llama::Config::from_json(base + R"(,"model_type":"mistral"})", "cfg"),
                    Catch::Contains("model_type"));
  CHECK_THROWS_WITH(llama::Config::from_json(base + R"(,"attention_bias":true})", "cfg"),
                    Catch::Contains("attention_bias"));
  CHECK_THROWS_WITH(llama::Config::from_json(base + R"(,"num_key_value_heads":3})", "cfg"),
                    Catch::Contains("multiple of num_key_value_heads"));
  CHECK_THROWS_WITH(llama::Config::from_json(R"({"hidden_size":64})", "cfg"),
                    Catch::Contains("intermediate_size"));
  // A checkpoint missing a tensor, or with a wrong shape, is refused by name.
  auto w = lm::load_safetensors(model_dir("tiny-bf16"));
  const llama::Config cfg = llama::Config::from_file(model_dir("tiny-bf16") + "/config.json");
  auto missing = w;
  missing.erase("model.layers.0.mlp.up_proj.weight");
  CHECK_THROWS_WITH(llama::Model(cfg, missing), Catch::Contains("model.layers.0.mlp.up_proj.weight"));
  auto wrong = w;
  wrong.at("model.norm.weight") = lm::HostTensor(lm::bf16, {3});
  CHECK_THROWS_WITH(llama::Model(cfg, wrong), Catch::Contains("has shape (3)"));
}
