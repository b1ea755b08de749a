// One e-graph search: a graph in, a kernel plan out (the phases of compile_graph.hpp for
// one block). Its plan's leaves are the graph's Input/Param names.
#pragma once

#include <chrono>
#include <map>
#include <memory>
#include <unordered_map>
#include <string>
#include <vector>

#include "compiler/plan.hpp"
#include "ir/kernel_body.hpp"
#include "luminal/egraph/extract.hpp"
#include "luminal/target.hpp"
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
  /// Ranks of the SPMD program (CompileOptions::communicator); > 1 adds the "sharding"
  /// rules to the math phase.
  int64_t world = 1;
};

struct SearchResult {
  KernelPlan plan;
  int64_t egraph_nodes = 0, egraph_classes = 0, iterations = 0;
  std::string stop_reason;          ///< "saturated", or the limit that stopped a phase
  std::vector<std::string> phases;  ///< report lines
  double est_seconds = 0;
};

SearchResult search_graph(const detail::GraphImpl& g, const SearchSettings& s);

/// The settings compile() searches with for `target` (cost model, library GEMM, pass sets),
/// with the time budget counted from `start`.
SearchSettings make_search_settings(const Target& target, const CompileOptions& options,
                                    std::chrono::steady_clock::time_point start);

/// Phases 1 and 2 of one search: the e-graph after the math rules, lowering and fusion,
/// ready for extraction (what search_graph extracts from; tests extract it other ways).
struct SaturatedGraph {
  ir::EGraph g;
  std::vector<std::pair<std::string, ir::Id>> outputs;  ///< the graph's outputs' classes
  std::vector<ir::Id> roots;                            ///< the same classes, in order
  int64_t iterations = 0;
  std::vector<std::string> stops;   ///< limits hit, per phase
  std::vector<std::string> phases;  ///< report lines
};
std::unique_ptr<SaturatedGraph> saturate_graph(const detail::GraphImpl& g, const SearchSettings& s);

/// The guided passes (rules::RuleInfo::guided: absorb-views) applied to the kernels of an
/// extracted program (`choice`, reachable from `roots`), then the passes after them on the
/// nodes they added, then the kernel rules (search_graph extracts again after this).
/// Returns the number of nodes added.
std::size_t guided_round(ir::EGraph& g, const SearchSettings& s, const std::vector<ir::Id>& roots,
                         const std::vector<ir::Id>& choice);

/// The extractor's node cost: the roofline seconds of a kernel node on the target (dims
/// guessed from the graph's declared ranges), 0 for Input/Param leaves, +infinity for
/// math nodes. Memoized per payload and which of its slots are the program's leaves
/// (read from memory when the program's leaves exceed the last-level cache).
class KernelCost {
 public:
  KernelCost(const ir::EGraph& g, const detail::GraphImpl& graph, const detail::TargetDesc& target);
  double operator()(const ir::NodeView& v) const;
  /// What `operator()` prices a kernel node from (LUMINAL_DEBUG_EXTRACT prints it).
  detail::KernelWork work(const ir::NodeView& v) const;

 private:
  const ir::EGraph* g_;
  detail::TargetDesc target_;
  ir::DimGuess dims_;
  bool leaves_from_memory_ = false;
  detail::KernelWork work_of(const ir::NodeView& v) const;
  mutable std::map<std::pair<uint32_t, std::vector<bool>>, double> memo_;
  // The body's work (ir::body_work) shared by launch twins: body, kind, leaf slots and
  // the part of the launch the body's work reads (ir::body_launch_key). Interned specs
  // live as long as the e-graph, so their bodies' addresses are stable keys.
  struct BodyKey {
    const detail::GraphImpl* body;
    ir::KernelKind kind;
    std::vector<uint8_t> leaves;  // per slot: 0 computed, 1 an input, 2 a param
    std::vector<int64_t> launch;
    auto operator<=>(const BodyKey&) const = default;
  };
  mutable std::map<BodyKey, detail::KernelWork> body_memo_;
};

/// The DAG extractor's settings the compiler uses.
egraph::DagOptions extraction_options();

}  // namespace luminal::compiler
