// The alternatives a pass adds beside a kernel already in the e-graph: the same body with
// a launch (GPU schedules), a library call (BLAS GEMM), another collective form. One loop
// for every such pass, so each states only which kernels it takes and what it makes.
#pragma once

#include <cstddef>
#include <limits>
#include <memory>
#include <utility>
#include <vector>

#include "ir/build.hpp"
#include "ir/kernel_body.hpp"

namespace luminal::rules {

/// Kernels to add, each with the class it computes.
using KernelsToAdd = std::vector<std::pair<egraph::Id, ir::Variant>>;

/// Merges each kernel of `todo` into its class, skipping any that reads its own class (a
/// view absorbed with its inverse: a cycle no program can use), until the e-graph holds
/// `node_limit` nodes; then rebuilds. Returns the number of nodes added (a kernel the
/// e-graph holds already adds none).
inline std::size_t merge_kernels(ir::EGraph& g, const KernelsToAdd& todo,
                                 std::size_t node_limit = std::numeric_limits<std::size_t>::max()) {
  const std::size_t before = g.num_nodes();
  for (const auto& [cls, v] : todo) {
    if (g.num_nodes() >= node_limit) break;
    bool own = false;
    for (egraph::Id k : v.kids) own = own || g.find(k) == g.find(cls);
    if (!own) g.merge(cls, ir::add_kernel(g, v.spec, v.kids));
  }
  g.rebuild();
  return g.num_nodes() - before;
}

/// For every kernel node of `kind` that has no launch yet, the specs `twins(spec)` returns
/// (copies of it, changed; finalized here), each merged into the node's class with the
/// same kids. Stops adding once the e-graph holds `node_limit` nodes; kernel nodes with
/// ids below `first_node` are left alone (PassContext::first_node). Returns the number of
/// nodes added.
template <class Twins>
std::size_t add_kernel_twins(ir::EGraph& g, ir::KernelKind kind, Twins twins,
                             std::size_t node_limit = std::numeric_limits<std::size_t>::max(),
                             std::size_t first_node = 0) {
  if (!g.is_clean()) g.rebuild();
  KernelsToAdd todo;
  const auto& ix = g.index();
  for (egraph::Id cls : ix.classes_with(ir::Op::Kernel))
    for (egraph::Id nd : ix.nodes(cls, ir::Op::Kernel)) {
      if (nd < first_node) continue;
      const auto& spec = *g.analysis().attrs().get(g.node(nd).payload).kernel;
      if (spec.kind != kind || !spec.launch.empty()) continue;
      const auto k = g.node(nd).kids;
      for (std::shared_ptr<ir::KernelSpec>& s : twins(spec)) {
        s->finalize();
        todo.emplace_back(cls, ir::Variant{std::move(s), std::vector<egraph::Id>(k.begin(), k.end())});
      }
    }
  return merge_kernels(g, todo, node_limit);
}

}  // namespace luminal::rules
