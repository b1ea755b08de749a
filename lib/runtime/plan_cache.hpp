// The plan cache: compile() of a graph it has compiled before skips the search.
//
// The e-graph search (saturation, lowering, fusion, extraction) is a pure function of
// the graph, the target's description, the options that steer it and the compiler
// itself (its rules and code). Its result, the kernel plan, is cached:
//  * in memory, for the life of the process;
//  * on disk, in `<cache dir>/plans/<key>.plan` (the JIT's cache folder: the
//    CompileOptions::cache_dir, else LUMINAL_CACHE_DIR or ~/.cache/luminal).
// The key is a 128-bit hash of: the graph as serialized by Callable::save (nodes, dims
// and their ranges and multiples, names, guards), the target string, the host CPU's
// model and flags, fast_math / time budget / node and iteration limits, the registered
// rules (name, set, fast-math tag), every LUMINAL_* environment variable that can steer
// the search, and the identity of this libluminal build (its GNU build-id, else its
// size and modification time): a rebuilt library never reads an older build's plans.
// Entries are written atomically (temp file + rename) and carry a checksum; a truncated
// or corrupt entry is deleted and the graph searched again. compile() does not store a
// plan whose search stopped on its wall-clock budget (it depends on the machine's load).
//
// LUMINAL_PLAN_CACHE=0 disables both levels (every compile searches).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "compiler/plan.hpp"
#include "graph/graph_impl.hpp"
#include "luminal/callable.hpp"
#include "luminal/compile.hpp"
#include "luminal/target.hpp"

namespace luminal::detail {

struct CachedPlan {
  std::shared_ptr<const compiler::KernelPlan> plan;
  CompileReport report;  ///< the search's report (before any backend adds to it)
};

struct PlanCacheStats {
  uint64_t memory_hits = 0;
  uint64_t disk_hits = 0;
  uint64_t misses = 0;
  uint64_t corrupt_entries = 0;  ///< disk entries rejected (and deleted)
};

/// A plan and its report as bytes (the disk entry's body; each distinct kernel spec once),
/// and back: decode throws RuntimeError on bytes that are not such an encoding.
std::string encode_cached_plan(const CachedPlan& entry);
CachedPlan decode_cached_plan(const std::string& bytes);

class PlanCache {
 public:
  /// Empty when the cache is disabled (LUMINAL_PLAN_CACHE=0).
  static std::string key(const GraphImpl& g, const Target& target, const CompileOptions& options);
  /// The cached plan for `key`, or null. `cache_dir` = CompileOptions::cache_dir.
  static std::shared_ptr<const CachedPlan> find(const std::string& key, const std::string& cache_dir);
  static void store(const std::string& key, const std::string& cache_dir, const CachedPlan& entry);
  static PlanCacheStats stats();
  /// Forgets the in-memory entries (tests: the next find reads the disk).
  static void clear_memory();
};

}  // namespace luminal::detail
