// Run under mpirun: the Llama example (examples/llama) with tensor parallelism. Every rank
// loads the same checkpoint, runs greedy generation once as one process (no communicator)
// and once as a rank of the job (Communicator::from_environment), and checks at every step
// (prefill, then each decode step with the KV cache) that the sharded run's logits equal
// the single-process run's within rounding and that the generated ids are identical, that
// the logits are bit-identical on every rank, and that the decode step has Megatron's plan
// (2 all_reduce per layer). The rank's session binds its weights with bind_safetensors (as
// llama-generate under mpirun does): each split weight is held as this rank's block, 1/P
// of it, resident as such (mincore), one copy shared by prefill and decode; then every
// weight is bound again whole (each program copies its block out) and the logits must not
// change by a bit. Exit status 0 on every rank when all holds.
//   mpirun -np 2 dist_mpi_llama MODEL_DIR     (also -np 4 --oversubscribe)
// MODEL_DIR is written by make-llama at test time (a model large enough for the cost model
// to shard its decode step; the committed tiny ones stay whole).
#include <sys/mman.h>
#include <unistd.h>

#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdint>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "llama_model.hpp"
#include "luminal/luminal.hpp"
#include "runtime/executable.hpp"

namespace lm = luminal;

namespace {

constexpr int kSteps = 12;  // prefill + 11 decode steps

struct Run {
  std::vector<std::vector<float>> logits;  // per step
  std::vector<int32_t> tokens;
  lm::CompileReport prefill_report, decode_report;
};

Run generate(llama::Session& session, const std::vector<int32_t>& prompt) {
  session.reset(static_cast<int64_t>(prompt.size()) + kSteps);
  Run r;
  std::span<const float> got = session.prefill(prompt);
  for (int s = 0; s < kSteps; ++s) {
    r.logits.emplace_back(got.begin(), got.end());
    r.tokens.push_back(llama::argmax(got));
    if (s + 1 < kSteps) got = session.decode(r.tokens.back());
  }
  r.prefill_report = session.prefill_fn().report();
  r.decode_report = session.decode_fn().report();
  return r;
}

// Bytes of [p, p + bytes) resident now, in whole pages (mincore).
int64_t resident_bytes(const void* p, std::size_t bytes) {
  const auto page = static_cast<std::uintptr_t>(::sysconf(_SC_PAGESIZE));
  const std::uintptr_t begin = reinterpret_cast<std::uintptr_t>(p) / page * page;
  const std::size_t n = (reinterpret_cast<std::uintptr_t>(p) + bytes - begin + page - 1) / page;
  std::vector<unsigned char> v(n);
  if (::mincore(reinterpret_cast<void*>(begin), n * page, v.data()) != 0) return -1;
  int64_t r = 0;
  for (unsigned char c : v) r += (c & 1) ? static_cast<int64_t>(page) : 0;
  return r;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: mpirun -np N dist_mpi_llama MODEL_DIR\n");
    return 2;
  }
  auto comm = lm::Communicator::from_environment();
  const int rank = comm->rank(), P = comm->size();
  try {
    const llama::Model model = llama::Model::load(argv[1]);
    const std::vector<int32_t> prompt = {1, 17, 42, 7, 99};
    lm::CompileOptions single;
    single.threads = 1;
    llama::Session one(model, lm::Target::cpu(), single);
    const Run want = generate(one, prompt);
    lm::CompileOptions o = single;
    o.communicator = comm;
    o.time_budget_seconds = 600;  // every rank's search saturates: the same plan everywhere
    llama::Session tp(model, lm::Target::cpu(), o);
    const Run got = generate(tp, prompt);
    // The session bound its weights with bind_safetensors (the model has a source): each
    // split weight is held as this rank's block -- one copy for both programs -- and
    // resident as such; every other weight is a view of the mapped file.
    int split_weights = 0;
    int64_t whole_split = 0, held_split = 0, resident_split = 0;
    std::map<std::string, const void*> block_of;
    bool shared = true;
    for (const lm::Callable* fn : {&tp.prefill_fn(), &tp.decode_fn()})
      for (const std::string& name : fn->param_names()) {
        const lm::ParamRegion r = fn->param_region(name);
        bool whole = r.end == model.weights().at(name).shape();
        for (size_t a = 0; a < r.start.size(); ++a) whole = whole && r.start[a] == 0;
        if (whole) continue;
        const lm::HostTensor& bound = *fn->state()->params.at(name);
        auto [it, fresh] = block_of.emplace(name, bound.data());
        if (!fresh) {
          shared = shared && it->second == bound.data();
          continue;
        }
        ++split_weights;
        whole_split += static_cast<int64_t>(model.weights().at(name).nbytes());
        held_split += static_cast<int64_t>(bound.nbytes());
        resident_split += resident_bytes(bound.data(), bound.nbytes());
      }
    const int64_t page = ::sysconf(_SC_PAGESIZE);
    const bool memory_ok = shared && held_split * P == whole_split && resident_split >= held_split &&
                           resident_split <= held_split + 2 * page * split_weights;
    // The same programs with every weight bound whole: each copies its block out.
    for (const lm::Callable& c : {tp.prefill_fn(), tp.decode_fn()}) {
      lm::Callable fn = c;
      for (const std::string& name : fn.param_names()) fn.bind(name, model.weights().at(name));
    }
    const Run shard = generate(tp, prompt);

    bool ok = true;
    double worst_ratio = 0;
    for (int s = 0; s < kSteps; ++s) {
      // Within rounding relative to the logits' scale: a rank sums its block of each
      // contracted axis, then the ranks' partial sums are added (another order).
      const auto& w = want.logits[static_cast<size_t>(s)];
      const auto& g = got.logits[static_cast<size_t>(s)];
      double scale = 0, worst = 0;
      for (size_t i = 0; i < w.size(); ++i) {
        scale = std::max(scale, static_cast<double>(std::fabs(w[i])));
        worst = std::max(worst, static_cast<double>(std::fabs(w[i] - g[i])));
      }
      worst_ratio = std::max(worst_ratio, worst / (1e-5 * std::max(1.0, scale)));
    }
    ok = ok && worst_ratio <= 1.0;
    const bool same_tokens = got.tokens == want.tokens;
    ok = ok && same_tokens;
    // Every step's logits, gathered, must be bit-identical on every rank.
    bool identical = true;
    for (const auto& g : got.logits) {
      const size_t n = g.size() * sizeof(float);
      std::vector<std::byte> all(n * static_cast<size_t>(P));
      comm->all_gather(g.data(), all.data(), n);
      for (int q = 1; q < P; ++q)
        identical = identical && std::memcmp(all.data(), all.data() + q * n, n) == 0;
    }
    ok = ok && identical;
    // Whole binding: bit for bit the shard binding's logits, with weights really split
    // (q, k, v, o, gate, up, down of every layer in the decode graph at least).
    bool shard_same = shard.tokens == got.tokens;
    for (size_t s = 0; s < got.logits.size(); ++s)
      shard_same = shard_same && std::memcmp(shard.logits[s].data(), got.logits[s].data(),
                                             got.logits[s].size() * sizeof(float)) == 0;
    ok = ok && shard_same && memory_ok && split_weights >= 7 * model.config().num_hidden_layers;
    // Not a vacuous pass: both graphs really are sharded over the ranks.
    // And the decode step has Megatron's plan: o_proj and down split by rows, one
    // all_reduce each per layer (besides, only the new K/V rows -- outputs -- are gathered).
    const std::string& plan = got.decode_report.sharding;
    const size_t at = plan.find(" all_reduce");
    size_t b = at;
    while (at != std::string::npos && b > 0 && std::isdigit(static_cast<unsigned char>(plan[b - 1]))) --b;
    const long long all_reduces = at == std::string::npos || b == at ? 0 : std::stoll(plan.substr(b, at - b));
    const bool sharded = got.prefill_report.collectives > 0 && got.decode_report.ranks == P &&
                         all_reduces == 2 * model.config().num_hidden_layers;
    ok = ok && sharded;
    std::string ids;
    for (int32_t t : got.tokens) {
      if (!ids.empty()) ids += ',';
      ids += std::to_string(t);
    }
    std::printf(
        "rank %d of %d: tokens %s (%s the single process's); logits error ratio %.3g; identical on every "
        "rank: %s; "
        "collectives prefill %lld, decode %lld; %d split weights held as blocks: %lld of %lld bytes (1/%d), "
        "%lld resident%s; bound whole instead: %s\n",
        rank, P, ids.c_str(), same_tokens ? "equal to" : "DIFFERENT from", worst_ratio,
        identical ? "yes" : "no", static_cast<long long>(got.prefill_report.collectives),
        static_cast<long long>(got.decode_report.collectives), split_weights, static_cast<long long>(held_split),
        static_cast<long long>(whole_split), P, static_cast<long long>(resident_split),
        shared ? "" : " (NOT shared by prefill and decode)", shard_same ? "same logits" : "DIFFERENT logits");
    if (rank == 0) std::printf("decode: %s\n", got.decode_report.to_string().c_str());
    std::fflush(stdout);
    comm->barrier();
    return ok ? 0 : 1;
  } catch (const std::exception& e) {
    std::printf("rank %d: %s\n", rank, e.what());
    std::fflush(stdout);
    return 3;
  }
}
