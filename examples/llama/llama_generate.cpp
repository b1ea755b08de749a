// llama-generate: greedy generation from a Hugging Face Llama checkpoint folder.
//
//   llama-generate --model DIR --tokens 1,2,3 --steps N [--target T] [--threads N] [--kv f32|f16|bf16]
//                  [--mmap]
//
// Loads DIR/config.json and the weights (copied into transparent huge pages: decode
// streams every weight each token, and 4 KiB pages of a file mapping cost ~13% of the
// decode speed here; --mmap keeps zero-copy views of the mapped file), compiles the prefill and
// decode graphs once each (a second start finds both in the plan and JIT caches), runs the
// prompt, then generates N tokens (the first from the prompt's logits, one decode step for
// each of the others). --kv: the KV cache's element type (default f32; f16 halves it, as
// llama.cpp's default cache). Prints the generated ids, the throughput of the prompt and of the
// decode steps, the compile time and the compile reports. Progress goes to stderr.
//
// Under mpirun (`mpirun -np N llama-generate ...`) the N processes run the model with
// tensor parallelism: each compiles with the job's communicator, the search shards the
// graphs over the ranks, and every rank computes the same tokens; rank 0 prints them.
#include <chrono>
#include <cstdio>
#include <algorithm>
#include <cstdlib>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "llama_model.hpp"
#include "luminal/luminal.hpp"

namespace {

namespace lm = luminal;
using Clock = std::chrono::steady_clock;

[[noreturn]] void usage(const std::string& msg) {
  std::fprintf(stderr,
               "llama-generate: %s\nusage: llama-generate --model DIR --tokens 1,2,3 --steps N [--target T] "
               "[--threads N] [--kv f32|f16|bf16] [--mmap]\n",
               msg.c_str());
  std::exit(2);
}

std::vector<int32_t> parse_tokens(const std::string& s) {
  std::vector<int32_t> out;
  size_t at = 0;
  while (at <= s.size()) {
    const size_t comma = s.find(',', at);
    const std::string item = s.substr(at, comma == std::string::npos ? std::string::npos : comma - at);
    char* end = nullptr;
    const long v = std::strtol(item.c_str(), &end, 10);
    if (item.empty() || !end || *end || v < 0 || v > INT32_MAX) usage("--tokens: '" + item + "' is not a token id");
    out.push_back(static_cast<int32_t>(v));
    if (comma == std::string::npos) break;
    at = comma + 1;
  }
  return out;
}

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

// Bytes of the weights this process holds for the session: each param's region (its shard
// on a rank of a tensor-parallel job, else the whole weight), counted once per name.
int64_t held_weight_bytes(const llama::Model& model, const llama::Session& s) {
  std::map<std::string, int64_t> held;
  for (const lm::Callable* fn : {&s.prefill_fn(), &s.decode_fn()})
    for (const std::string& name : fn->param_names()) {
      const lm::ParamRegion r = fn->param_region(name);
      int64_t n = static_cast<int64_t>(lm::dtype_size(model.weights().at(name).dtype()));
      for (size_t a = 0; a < r.end.size(); ++a) n *= r.end[a] - r.start[a];
      held[name] = std::max(held[name], n);
    }
  int64_t total = 0;
  for (const auto& [name, n] : held) total += n;
  return total;
}

// This process's resident memory from /proc/self/status: "VmRSS 123.4 MB (anon 100.2,
// file 23.2)"; "" where it cannot be read.
std::string resident_memory() {
  std::FILE* f = std::fopen("/proc/self/status", "r");
  if (!f) return "";
  char line[256];
  double rss = -1, anon = -1, file = -1;
  while (std::fgets(line, sizeof line, f)) {
    double kb = 0;
    if (std::sscanf(line, "VmRSS: %lf", &kb) == 1) rss = kb;
    if (std::sscanf(line, "RssAnon: %lf", &kb) == 1) anon = kb;
    if (std::sscanf(line, "RssFile: %lf", &kb) == 1) file = kb;
  }
  std::fclose(f);
  if (rss < 0) return "";
  char out[128];
  std::snprintf(out, sizeof out, "VmRSS %.1f MB (anon %.1f, file %.1f)", rss * 1024 / 1e6, anon * 1024 / 1e6,
                file * 1024 / 1e6);
  return out;
}

}  // namespace

int main(int argc, char** argv) try {
  std::string model_dir, tokens_arg, target_arg, kv_arg = "f32";
  long steps = -1, threads = 0;
  bool mmap_weights = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--mmap") {
      mmap_weights = true;
      continue;
    }
    if (i + 1 >= argc) usage("missing value for '" + a + "'");
    const std::string v = argv[++i];
    if (a == "--model") {
      model_dir = v;
    } else if (a == "--tokens") {
      tokens_arg = v;
    } else if (a == "--steps") {
      steps = std::strtol(v.c_str(), nullptr, 10);
    } else if (a == "--target") {
      target_arg = v;
    } else if (a == "--kv") {
      kv_arg = v;
    } else if (a == "--threads") {
      threads = std::strtol(v.c_str(), nullptr, 10);
      if (threads < 1) usage("--threads needs a positive integer");
    } else {
      usage("unknown option '" + a + "'");
    }
  }
  if (model_dir.empty() || tokens_arg.empty() || steps < 1) usage("--model, --tokens and --steps (>= 1) are required");
  const std::vector<int32_t> prompt = parse_tokens(tokens_arg);
  lm::DType kv = lm::f32;
  try {
    kv = llama::kv_dtype_from_name(kv_arg);
  } catch (const std::exception& e) {
    usage(std::string("--kv: ") + e.what());
  }
  const lm::Target target = target_arg.empty() ? lm::Target::best() : lm::Target::parse(target_arg);
  // Started by mpirun: one rank of a tensor-parallel job (docs/distributed.md).
  std::shared_ptr<lm::Communicator> comm;
  if (lm::Communicator::launched_by_mpirun()) comm = lm::Communicator::from_environment();
  const std::string who = comm ? "llama-generate[rank " + std::to_string(comm->rank()) + "]" : "llama-generate";
  auto progress = [&who](const std::string& msg) { std::fprintf(stderr, "%s: %s\n", who.c_str(), msg.c_str()); };

  auto t0 = Clock::now();
  // Decode streams every weight each token: in huge pages unless asked for zero-copy
  // views of the file, or one rank of several (it binds only its shards, from the file).
  lm::LoadOptions placement;
  placement.huge_pages = !mmap_weights && !comm;
  const llama::Model model = llama::Model::load(model_dir, progress, placement);
  const double load_s = seconds_since(t0);
  const llama::Config& c = model.config();
  for (int32_t t : prompt)
    if (t >= c.vocab_size) usage("--tokens: id " + std::to_string(t) + " is outside the vocabulary");
  // A model is compiled once and its plan cached: give the search room to finish even on
  // a busy machine (a plan cut short by the clock is correct but slower, and not cached).
  lm::CompileOptions options;
  options.time_budget_seconds = 120;
  if (threads > 0) options.threads = static_cast<int>(threads);  // each call's threads, the caller included
  options.communicator = comm;
  llama::Session session(model, target, options, progress, kv);

  const int64_t capacity = static_cast<int64_t>(prompt.size()) + steps;
  session.reset(capacity);
  std::vector<int32_t> generated;
  t0 = Clock::now();
  int32_t next = llama::argmax(session.prefill(prompt));
  const double prefill_s = seconds_since(t0);
  generated.push_back(next);
  t0 = Clock::now();
  for (long s = 1; s < steps; ++s) {
    next = llama::argmax(session.decode(next));
    generated.push_back(next);
  }
  const double decode_s = seconds_since(t0);
  progress("weights held: " + std::to_string(held_weight_bytes(model, session) / 1000000) + " MB of " +
           std::to_string(model.weight_bytes() / 1000000) + " MB; resident after generating: " + resident_memory());
  if (comm && comm->rank() != 0) return 0;  // every rank has the same tokens: one prints

  std::printf("model: %s; weights %s, %.1f MB, loaded in %.3f s\n", c.summary().c_str(),
              model.weight_dtype().c_str(), static_cast<double>(model.weight_bytes()) / 1e6, load_s);
  std::string ids;
  for (size_t i = 0; i < generated.size(); ++i) {
    if (i) ids += ',';
    ids += std::to_string(generated[i]);
  }
  std::printf("tokens: %s\n", ids.c_str());
  std::printf("prefill_tokens_per_s=%.2f\n", static_cast<double>(prompt.size()) / prefill_s);
  if (steps > 1)
    std::printf("decode_tokens_per_s=%.2f\n", static_cast<double>(steps - 1) / decode_s);
  else
    std::printf("decode_tokens_per_s=n/a (one token: no decode step)\n");
  std::printf("compile_seconds=%.3f\n", session.compile_seconds());
  std::printf("prefill: %s\n", session.prefill_fn().report().to_string().c_str());
  std::printf("decode: %s\n", session.decode_fn().report().to_string().c_str());
  return 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "llama-generate: %s\n", e.what());
  return 1;
}
