// compile(): a Graph and a Target in, a Callable out.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "luminal/callable.hpp"
#include "luminal/communicator.hpp"
#include "luminal/graph.hpp"
#include "luminal/serving.hpp"
#include "luminal/target.hpp"

namespace luminal {

struct CompileOptions {
  /// Generate and JIT-compile every kernel without needing the target's device: the
  /// Callable has a full report but throws RuntimeError when called.
  bool compile_only = false;
  /// Enables rewrite rules that may change NaN/inf results.
  bool fast_math = false;
  /// Wall-clock budget of the search (saturation + extraction).
  double time_budget_seconds = 10.0;
  /// Maximum e-graph nodes during saturation.
  int64_t node_limit = 200000;
  /// Maximum saturation iterations.
  int64_t iteration_limit = 30;
  /// Run every compiled program once against the reference interpreter on random
  /// inputs and throw CompileError on a mismatch (translation validation).
  bool validate = false;
  /// On-disk JIT cache folder; empty: the default cache location.
  std::string cache_dir;
  /// Rules or whole rule sets ("algebra", "mul-comm", "fusion", ...) left out of the
  /// search: for bisecting which rule changes a compiled program. An unknown name, or the
  /// required lowering ("lower_reference"), is a CompileError.
  std::vector<std::string> skip_rules;

  // Serving (docs/serving.md). None of these changes the compiled program.
  /// Threads of each call, the caller included, unless the call says otherwise
  /// (CallOptions::threads); 0: all of the pool's workers plus the caller.
  int threads = 0;
  /// The workers calls borrow; null: ThreadPool::shared().
  std::shared_ptr<ThreadPool> thread_pool;
  /// Cap on the scratch memory (arenas) the Callable keeps for its calls, all concurrent
  /// calls together; 0: none. A call that would exceed it waits for another call's
  /// scratch (until its deadline); a call that alone needs more is a RuntimeError.
  int64_t max_arena_bytes = 0;
  /// Scratch unused this long is freed (by the next call, or by an idle pool worker).
  double arena_idle_seconds = 10;
  /// Tensor parallelism (docs/distributed.md): every rank compiles the same graph with a
  /// communicator of the same size; the search shards the program over its ranks (the
  /// "sharding" rules) and each call runs this rank's share plus the collectives. Params
  /// are bound whole on every rank; outputs are equal on every rank. Null: one process.
  std::shared_ptr<Communicator> communicator;
};

Callable compile(const Graph& graph, Target target, CompileOptions options = {});

}  // namespace luminal
