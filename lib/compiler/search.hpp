// One e-graph search: a graph in, a kernel plan out (the phases of compile_graph.hpp for
// one block). Its plan's leaves are the graph's Input/Param names.
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "compiler/plan.hpp"
#include "graph/graph_impl.hpp"
#include "luminal/compile.hpp"
#include "rules/registry.hpp"

namespace luminal::compiler {

struct SearchSettings {
  rules::PassContext ctx;
  std::vector<std::string> pass_sets;  ///< after the math rules, in order
  CompileOptions options;
  std::chrono::steady_clock::time_point deadline;
  bool trace = false;
};

struct SearchResult {
  KernelPlan plan;
  int64_t egraph_nodes = 0, egraph_classes = 0, iterations = 0;
  std::string stop_reason;          ///< "saturated", or the limit that stopped a phase
  std::vector<std::string> phases;  ///< report lines
  double est_seconds = 0;
};

SearchResult search_graph(const detail::GraphImpl& g, const SearchSettings& s);

}  // namespace luminal::compiler
