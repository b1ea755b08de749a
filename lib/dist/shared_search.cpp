#include "dist/shared_search.hpp"

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "dist/collectives.hpp"
#include "luminal/error.hpp"
#include "runtime/aot.hpp"
#include "runtime/plan_cache.hpp"

namespace luminal::dist {

namespace {

// rank 0's payload size that says "the search failed; the payload is its message".
constexpr uint64_t kFailed = uint64_t{1} << 63;

uint64_t fnv(const std::string& s, uint64_t h = 0xcbf29ce484222325ull) {
  for (unsigned char c : s) h = (h ^ c) * 0x100000001b3ull;
  return h;
}

// What decides the plan: the graph, the target and the search options. (The serving
// options, the cache folder and compile_only do not change it.)
uint64_t search_fingerprint(const detail::GraphImpl& g, const Target& target, const CompileOptions& o) {
  std::string k = aot::serialize_graph(g);
  k += '\0' + target.to_string();
  k += '\0' + std::to_string(o.fast_math) + ',' + std::to_string(o.node_limit) + ',' +
       std::to_string(o.iteration_limit) + ',' + std::to_string(o.time_budget_seconds);
  for (const auto& r : o.skip_rules) k += '\0' + r;
  k += '\0' + std::to_string(o.communicator ? o.communicator->size() : 1);
  return fnv(k);
}

// rank 0's bytes on every rank: the size first, then the bytes (the Communicator has no
// broadcast; an all_gather of equal blocks carries rank 0's and discards the others').
std::string from_rank0(Communicator& comm, uint64_t& head, const std::string& mine) {
  const int P = comm.size();
  std::vector<uint64_t> heads(static_cast<size_t>(P));
  comm.all_gather(&head, heads.data(), sizeof head);
  head = heads[0];
  const uint64_t n = head & ~kFailed;
  std::string send(static_cast<size_t>(n), '\0');
  if (comm.rank() == 0) send = mine;
  std::string all(static_cast<size_t>(n) * static_cast<size_t>(P), '\0');
  if (n > 0) comm.all_gather(send.data(), all.data(), static_cast<size_t>(n));
  return all.substr(0, static_cast<size_t>(n));
}

}  // namespace

compiler::CompiledProgram search_once_for_all_ranks(Communicator& comm, const detail::GraphImpl& g,
                                                    const Target& target, const CompileOptions& options) {
  const int P = comm.size(), rank = comm.rank();
  if (P <= 1) return compiler::compile_graph(g, target, options);

  const std::string differ = ranks_differing_from_rank0(comm, search_fingerprint(g, target, options));
  if (!differ.empty())
    throw CompileError("[compile] rank " + std::to_string(rank) + " of " + std::to_string(P) + ": rank(s) " + differ +
                       " compile a different graph, target or search options than rank 0; every rank must compile "
                       "the same graph with the same options");

  compiler::CompiledProgram program;
  std::string payload;
  uint64_t head = 0;
  if (rank == 0) {
    try {
      program = compiler::compile_graph(g, target, options);
      payload = detail::encode_cached_plan(detail::CachedPlan{program.plan, program.report});
      head = payload.size();
    } catch (const std::exception& e) {
      payload = e.what();
      head = payload.size() | kFailed;
    }
  }
  const std::string bytes = from_rank0(comm, head, payload);
  if (head & kFailed) {
    if (rank == 0) throw CompileError(bytes);  // the search's own message
    throw CompileError("[compile] rank " + std::to_string(rank) + ": the search on rank 0 failed: " + bytes);
  }
  if (rank == 0) return program;
  detail::CachedPlan got = detail::decode_cached_plan(bytes);
  program.plan = got.plan;
  program.exe = compiler::make_plan_executable(got.plan);
  program.report = std::move(got.report);
  program.report.stop_reason += "; plan searched by rank 0";
  return program;
}

}  // namespace luminal::dist
