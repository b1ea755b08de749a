// The compiler pipeline (docs/design.md "From graph to kernels"):
//   graph -> e-graph -> math rules (algebra, movement, contraction; to saturation or
//   budget) -> lowering + fusion (kernel nodes) -> DAG-aware extraction over kernel nodes
//   -> a kernel plan, executed on the reference target with the interpreter.
// Repeated structure (transformer layers) is found by a structural hash and searched
// once; the decision is replayed for every copy.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "compiler/plan.hpp"
#include "cost/target_desc.hpp"
#include "graph/graph_impl.hpp"
#include "luminal/callable.hpp"
#include "luminal/compile.hpp"
#include "luminal/target.hpp"

namespace luminal::compiler {

struct CompiledProgram {
  std::shared_ptr<const KernelPlan> plan;
  std::shared_ptr<const detail::Executable> exe;  ///< runs `plan` with the interpreter
  CompileReport report;
  std::string dot;                  ///< the extracted kernel graph (Graphviz)
  std::vector<std::string> phases;  ///< one line per phase: what it did, time, why it stopped
  int64_t searches = 0;             ///< e-graph searches run (repeated blocks share one)
  int64_t blocks = 0;               ///< blocks the graph was split into (1: no repetition found)
};

/// Compiles the live part of `g` for `target`. Never fails because of a budget: hitting a
/// limit yields a correct (less optimized) program and `report.stop_reason` names it.
/// Environment: LUMINAL_TRACE_RULES=1 prints per-rule hits and time on stderr;
/// LUMINAL_DUMP_DOT=path writes `dot` to path.
CompiledProgram compile_graph(const detail::GraphImpl& g, const Target& target,
                              const CompileOptions& options);

/// The cost model's description of `target`: its GPU's row (LUMINAL_GPU_MODEL names a
/// CUDA board whose figures differ from its architecture's), else the host CPU.
detail::TargetDesc target_desc(const Target& target);

}  // namespace luminal::compiler
