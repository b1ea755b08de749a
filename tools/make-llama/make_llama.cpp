// make-llama: writes a random-weight Llama model in the Hugging Face layout (config.json
// and model.safetensors, or shards with model.safetensors.index.json) -- no PyTorch
// needed. Reference logits for a model come from tools/make-llama/reference.py.
//
//   make-llama --out DIR [--preset tiny|110m|1b] [--hidden N] [--layers N] [--heads N]
//              [--kv-heads N] [--ffn N] [--vocab N] [--head-dim N] [--max-pos N]
//              [--dtype f32|f16|bf16] [--tie] [--shards N] [--seed N] [--theta X]
//
// Weights are uniform with a deterministic seed: matrices with variance 1/columns
// (activations keep their scale through every layer, so the logits are spread and greedy
// decoding is not decided by rounding), norms around 1.
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "../../examples/llama/llama_model.hpp"
#include "luminal/luminal.hpp"
#include "safetensors_writer.hpp"

namespace {

namespace fs = std::filesystem;
namespace lm = luminal;

struct Rng {  // splitmix64: fast, deterministic on every platform
  uint64_t s;
  uint64_t next() {
    uint64_t z = (s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  float uniform() { return static_cast<float>(next() >> 40) * (1.0f / 16777216.0f) * 2.0f - 1.0f; }  // [-1, 1)
};

uint64_t hash_name(const std::string& s, uint64_t seed) {
  uint64_t h = 1469598103934665603ull ^ seed;
  for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
  return h;
}

[[noreturn]] void usage(const std::string& msg) {
  std::fprintf(stderr,
               "make-llama: %s\nusage: make-llama --out DIR [--preset tiny|110m|1b] [--hidden N] [--layers N] "
               "[--heads N] [--kv-heads N] [--ffn N] [--vocab N] [--head-dim N] [--max-pos N] "
               "[--dtype f32|f16|bf16] [--tie] [--shards N] [--seed N] [--theta X]\n",
               msg.c_str());
  std::exit(2);
}

}  // namespace

int main(int argc, char** argv) try {
  llama::Config c;
  // Default: a small model that writes and runs in seconds anywhere (the README demo).
  c.hidden_size = 256, c.num_hidden_layers = 4, c.num_attention_heads = 8, c.num_key_value_heads = 4;
  c.intermediate_size = 688, c.vocab_size = 4096, c.max_position_embeddings = 2048;
  std::string out, dtype = "f32";
  int64_t shards = 1, head_dim = 0;
  uint64_t seed = 0;
  std::map<std::string, std::string> args;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--tie") {
      c.tie_word_embeddings = true;
    } else if (a.rfind("--", 0) == 0 && i + 1 < argc) {
      args[a] = argv[++i];
    } else {
      usage("unexpected argument '" + a + "'");
    }
  }
  auto num = [&](const char* key, int64_t& dst) {
    auto it = args.find(key);
    if (it == args.end()) return;
    char* end = nullptr;
    const long long v = std::strtoll(it->second.c_str(), &end, 10);
    if (!end || *end || v <= 0) usage(std::string(key) + " needs a positive integer, got '" + it->second + "'");
    dst = v;
    args.erase(it);
  };
  if (args.count("--preset")) {
    const std::string p = args["--preset"];
    args.erase("--preset");
    if (p == "tiny") {  // the committed test model (about 2 MB in f32)
      c.hidden_size = 128, c.num_hidden_layers = 2, c.num_attention_heads = 4, c.num_key_value_heads = 2;
      c.intermediate_size = 344, c.vocab_size = 512, c.max_position_embeddings = 256;
    } else if (p == "110m") {  // the benchmark config of issue 16
      c.hidden_size = 768, c.num_hidden_layers = 12, c.num_attention_heads = 12, c.num_key_value_heads = 4;
      c.intermediate_size = 2048, c.vocab_size = 32000, c.max_position_embeddings = 2048;
    } else if (p == "1b") {  // TinyLlama-1.1B's shape
      c.hidden_size = 2048, c.num_hidden_layers = 16, c.num_attention_heads = 32, c.num_key_value_heads = 4;
      c.intermediate_size = 5632, c.vocab_size = 32000, c.max_position_embeddings = 2048;
    } else {
      usage("unknown preset '" + p + "'");
    }
  }
  if (args.count("--out")) out = args["--out"], args.erase("--out");
  if (args.count("--dtype")) dtype = args["--dtype"], args.erase("--dtype");
  if (args.count("--theta")) c.rope_theta = std::stod(args["--theta"]), args.erase("--theta");
  if (args.count("--seed")) {
    char* end = nullptr;
    seed = std::strtoull(args["--seed"].c_str(), &end, 10);
    if (!end || *end) usage("--seed needs a non-negative integer");
    args.erase("--seed");
  }
  num("--hidden", c.hidden_size);
  num("--layers", c.num_hidden_layers);
  num("--heads", c.num_attention_heads);
  num("--kv-heads", c.num_key_value_heads);
  num("--ffn", c.intermediate_size);
  num("--vocab", c.vocab_size);
  num("--max-pos", c.max_position_embeddings);
  num("--head-dim", head_dim);
  num("--shards", shards);
  if (!args.empty()) usage("unknown option '" + args.begin()->first + "'");
  if (out.empty()) usage("--out DIR is required");
  c.head_dim = head_dim ? head_dim : c.hidden_size / c.num_attention_heads;
  // Round-trip through the parser: the same checks a loaded config gets.
  c = llama::Config::from_json(c.to_json(), "make-llama");
  lm::DType dt;
  std::string st_dtype;
  if (dtype == "f32") {
    dt = lm::f32, st_dtype = "F32";
  } else if (dtype == "f16") {
    dt = lm::f16, st_dtype = "F16";
  } else if (dtype == "bf16") {
    dt = lm::bf16, st_dtype = "BF16";
  } else {
    usage("--dtype must be f32, f16 or bf16");
  }

  const auto t0 = std::chrono::steady_clock::now();
  fs::create_directories(out);
  {
    std::ofstream f(fs::path(out) / "config.json");
    f << c.to_json();
  }
  // Shards hold consecutive tensors of about equal size.
  const auto weights = llama::expected_weights(c);
  uint64_t total = 0;
  std::vector<st_writer::TensorInfo> infos;
  for (const auto& [name, shape] : weights) {
    infos.push_back({name, st_dtype, shape});
    total += infos.back().nbytes();
  }
  std::vector<std::vector<st_writer::TensorInfo>> groups(1);
  uint64_t acc = 0;
  for (const auto& t : infos) {
    if (acc >= total * groups.size() / static_cast<uint64_t>(shards) && !groups.back().empty() &&
        static_cast<int64_t>(groups.size()) < shards)
      groups.emplace_back();
    groups.back().push_back(t);
    acc += t.nbytes();
  }
  nlohmann::ordered_json weight_map;
  std::vector<float> buf;
  for (size_t gi = 0; gi < groups.size(); ++gi) {
    char name[64];
    if (groups.size() == 1)
      std::snprintf(name, sizeof name, "model.safetensors");
    else
      std::snprintf(name, sizeof name, "model-%05zu-of-%05zu.safetensors", gi + 1, groups.size());
    st_writer::Writer w((fs::path(out) / name).string(), groups[gi], {{"format", "pt"}});
    for (const auto& t : groups[gi]) {
      weight_map[t.name] = name;
      // Scale: matrices 1/columns variance (uniform on [-a, a] has variance a^2 / 3), the
      // embeddings included (with tied embeddings a token's own logit would otherwise
      // dwarf the rest and greedy decoding would repeat it forever); norms 1 +- 0.25.
      const bool norm = t.shape.size() == 1;
      const float a = norm ? 0.25f : std::sqrt(3.0f / static_cast<float>(t.shape[1]));
      Rng rng{hash_name(t.name, seed)};
      int64_t n = 1;
      for (int64_t d : t.shape) n *= d;
      const int64_t chunk = int64_t{1} << 20;
      for (int64_t at = 0; at < n; at += chunk) {
        const int64_t m = std::min(chunk, n - at);
        buf.resize(static_cast<size_t>(m));
        for (auto& x : buf) x = (norm ? 1.0f : 0.0f) + a * rng.uniform();
        if (dt == lm::f32) {
          w.put(buf.data(), buf.size() * 4);
        } else {
          const lm::HostTensor h = lm::HostTensor::from_f32(buf, {m}, dt);
          w.put(h.data(), h.nbytes());
        }
      }
    }
    w.close();
  }
  if (groups.size() > 1) {
    nlohmann::ordered_json idx = {{"metadata", {{"total_size", total}}}, {"weight_map", weight_map}};
    std::ofstream f(fs::path(out) / "model.safetensors.index.json");
    f << idx.dump(2) << "\n";
  }
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("make-llama: wrote %s (%s, %s weights, %.1f MB in %zu file(s), %.1f s)\n", out.c_str(),
              c.summary().c_str(), dtype.c_str(), static_cast<double>(total) / 1e6, groups.size(), secs);
  return 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "make-llama: %s\n", e.what());
  return 1;
}
