// The distributed plan in the compile report: which collectives one rank's program runs,
// the bytes it moves, and how much of the work reads a shard.
#pragma once

#include <cstdint>
#include <string>

#include "compiler/plan.hpp"
#include "graph/graph_impl.hpp"

namespace luminal::dist {

struct PlanSummary {
  int64_t collectives = 0;
  int64_t comm_bytes = 0;  ///< sent or received by one rank per call, at the planning dims
  int64_t scatter_gather = 0;  ///< all_reduces run as reduce-scatter + all_gather
  std::string text;        ///< "2 ranks (shm): 2 all_reduce ..., 6 of 7 kernels read a shard; ..."
};

/// `graph` supplies the planning values of its dims (upper bounds, at most 4096, as the
/// cost model assumes); `link` names the link the cost model assumed.
PlanSummary summarize(const compiler::KernelPlan& plan, const detail::GraphImpl& graph, int64_t world,
                      const std::string& link);

}  // namespace luminal::dist
