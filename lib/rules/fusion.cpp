// Fusion rules: a kernel absorbs a producer's kernel (its body substituted into the slot
// that read the producer's buffer), and GEMM kernels get tile configurations as
// alternatives. Every new kernel node joins the class of the kernel it extends, so fusion
// never changes meaning; whether a fused kernel is used is the extractor's cost question.
//
// Absorption is explored under a few policies rather than exhaustively (every subset of
// producers would be exponential): per class, in producer-before-consumer order, the
// class's direct kernel absorbs each producer's kernel of the SAME policy when
//   all          -- it is a legal kernel (ir::classify);
//   single-use   -- and the producer has one consumer (no duplicated work);
//   no-broadcast -- and the slot is not read under a broadcast (no recomputation);
//   no-reduce    -- and the producer has no reduction (reductions stay materialized).
// Producers with no arithmetic (views, constants) are absorbed under every policy.
#include <algorithm>
#include <array>
#include <unordered_map>
#include <vector>

#include "ir/build.hpp"
#include "ir/kernel_body.hpp"
#include "luminal/egraph/extract.hpp"
#include "rules/registry.hpp"

namespace luminal::rules {
using egraph::Id;
namespace {

enum Policy { kAll, kSingleUse, kNoBroadcast, kNoReduce, kNumPolicies };

std::size_t fuse_producers(EGraph& g, const PassContext& ctx) {
  if (!g.is_clean()) g.rebuild();
  // One representative math node per class, and a producer-first order of classes.
  auto cost = [](const ir::NodeView& v, std::span<const double> kc) {
    double s = v.op == ir::Op::Kernel ? egraph::kInfiniteCost : 1.0;
    for (double c : kc) s += c;
    return s;
  };
  egraph::GreedyExtractor<ir::TensorLang, ir::TensorAnalysis, decltype(cost)> rep(g, cost);
  const auto& ix = g.index();
  std::vector<Id> order;
  for (Id c : ix.classes())
    if (rep.best_node(c) != egraph::kNoId) order.push_back(c);
  std::stable_sort(order.begin(), order.end(), [&](Id a, Id b) { return rep.cost(a) < rep.cost(b); });
  std::unordered_map<Id, int> uses;
  for (Id c : order) {
    auto kids = g.node(rep.best_node(c)).kids;
    std::vector<Id> distinct(kids.begin(), kids.end());
    std::sort(distinct.begin(), distinct.end());
    distinct.erase(std::unique(distinct.begin(), distinct.end()), distinct.end());
    for (Id k : distinct) ++uses[g.find(k)];
  }

  std::array<std::unordered_map<Id, ir::Variant>, kNumPolicies> best;
  std::vector<std::pair<Id, ir::Variant>> todo;
  const std::size_t budget = ctx.node_limit > g.num_nodes() ? ctx.node_limit - g.num_nodes() : 0;
  for (Id c : order) {
    if (todo.size() >= budget) break;
    auto direct = ir::lower_node(g, rep.best_node(c));
    if (!direct) continue;
    for (int p = 0; p < kNumPolicies; ++p) {
      ir::Variant v = *direct;
      if (v.spec->kind != ir::KernelKind::Gather) {
        for (Id k : direct->kids) {
          auto it = best[static_cast<size_t>(p)].find(k);
          if (it == best[static_cast<size_t>(p)].end()) continue;
          const ir::Variant& prod = it->second;
          if (prod.spec->kind == ir::KernelKind::Gather) continue;
          auto pos = std::find(v.kids.begin(), v.kids.end(), k);
          if (pos == v.kids.end()) continue;
          const auto slot = static_cast<size_t>(pos - v.kids.begin());
          if (!ir::is_cheap(*prod.spec)) {
            if (p == kSingleUse && uses[k] != 1) continue;
            if (p == kNoBroadcast && ir::broadcast_slots(*v.spec)[slot]) continue;
            if (p == kNoReduce && ir::count_reductions(*prod.spec) > 0) continue;
          }
          if (auto nv = ir::substitute(g, v, slot, prod, ctx.max_body_nodes)) v = std::move(*nv);
        }
      }
      if (!(*v.spec == *direct->spec)) todo.emplace_back(c, v);
      best[static_cast<size_t>(p)].emplace(c, std::move(v));
    }
  }
  const std::size_t before = g.num_nodes();
  for (auto& [cls, v] : todo) g.merge(cls, ir::add_kernel(g, v.spec, v.kids));
  g.rebuild();
  return g.num_nodes() - before;
}

// Tile configurations of every generated GEMM: alternatives the cost model ranks by how
// well the tiles cover the output.
std::size_t gemm_tiles(EGraph& g, const PassContext& ctx) {
  if (!g.is_clean()) g.rebuild();
  static constexpr std::array<std::array<int64_t, 3>, 3> kTiles{{{16, 16, 16}, {32, 64, 16}, {64, 128, 32}}};
  std::vector<std::pair<Id, ir::Variant>> todo;
  const auto& ix = g.index();
  for (Id cls : ix.classes_with(ir::Op::Kernel))
    for (Id nd : ix.nodes(cls, ir::Op::Kernel)) {
      const auto& spec = *g.analysis().attrs().get(g.node(nd).payload).kernel;
      if (spec.kind != ir::KernelKind::Gemm || !spec.launch.empty()) continue;
      for (const auto& t : kTiles) {
        auto tiled = std::make_shared<ir::KernelSpec>(spec);
        tiled->launch.assign(t.begin(), t.end());
        tiled->finalize();
        auto k = g.node(nd).kids;
        todo.emplace_back(cls, ir::Variant{tiled, std::vector<Id>(k.begin(), k.end())});
      }
    }
  const std::size_t before = g.num_nodes();
  for (auto& [cls, v] : todo) {
    if (g.num_nodes() >= ctx.node_limit) break;
    g.merge(cls, ir::add_kernel(g, v.spec, v.kids));
  }
  g.rebuild();
  return g.num_nodes() - before;
}

LUMINAL_REGISTER_RULE({.name = "fuse-producers",
                       .set = "fusion",
                       .fast_math = false,
                       .doc = "kernel(.., slot P, ..) = kernel(.., body of P's kernel, ..)",
                       .rule = {},
                       .pass = fuse_producers,
                       .example = {}});
LUMINAL_REGISTER_RULE({.name = "gemm-tile-configs",
                       .set = "fusion",
                       .fast_math = false,
                       .doc = "gemm kernel = the same gemm with tiles (16,16,16) / (32,64,16) / (64,128,32)",
                       .rule = {},
                       .pass = gemm_tiles,
                       .example = {}});

}  // namespace
}  // namespace luminal::rules
