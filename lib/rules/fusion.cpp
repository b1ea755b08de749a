// Fusion rules: a kernel absorbs a producer's kernel (its body substituted into the slot
// that read the producer's buffer), and GEMM kernels get tile configurations as
// alternatives. Every new kernel node joins the class of the kernel it extends, so fusion
// never changes meaning; whether a fused kernel is used is the extractor's cost question.
//
// Absorption is explored under a few policies rather than exhaustively (every subset of
// producers would be exponential): per class, in producer-before-consumer order, the
// class's direct kernel absorbs each producer's kernel of the SAME policy when
//   all          -- it is a legal kernel (ir::classify);
//   all-no-gemm-copy -- and it is not a GEMM that another consumer also reads;
//   single-use   -- and the producer has one consumer (no duplicated work);
//   no-broadcast -- and the slot is not read under a broadcast (no recomputation);
//   no-reduce    -- and the producer has no reduction (reductions stay materialized);
//   views        -- as all-no-gemm-copy, but a class that is also a slice of a wider class
//                   (a product merged with its siblings, matmul-siblings) is read through
//                   that slice: consumers of Q, K and V read one Q|K|V product's buffer;
//                   and a program output rounded to f16/bf16 that other kernels also read
//                   is read as stored: its buffer is written anyway, in half the bytes (a
//                   decode step's new K/V row, rounded to an f16 cache's dtype and
//                   returned, is then a stored piece of the cache the attention kernel
//                   reads in place, not a rounding recomputed inside it);
//   stored       -- as all-no-gemm-copy with views' rounded outputs read as stored, but
//                   no slices of wider classes (the attention then reads the stored new
//                   K/V rows whether or not the projections are merged);
//   no-operand-prologue -- as all-no-gemm-copy, but a GEMM or attention kernel absorbs no
//                   elementwise producer with arithmetic into its operands: Q's and K's
//                   RoPE stay kernels of their own. An attention that absorbs them
//                   computes them inside (on a GPU in staged kernels of its own, a launch
//                   each through scratch); which is cheaper is the extractor's question,
//                   and the guided rounds fuse onward from the smaller kernel.
// Producers with no arithmetic (views, casts, constants) are absorbed under every policy
// (but the rounded outputs above), and absorb-views (below) offers them to every kernel
// node, not only the representative's variants.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <memory>
#include <optional>
#include <random>
#include <span>
#include <array>
#include <tuple>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "ir/attention_match.hpp"
#include "ir/build.hpp"
#include "ir/kernel_body.hpp"
#include "luminal/egraph/extract.hpp"
#include "luminal/graph.hpp"
#include "luminal/ops.hpp"
#include "rules/kernel_twins.hpp"
#include "rules/registry.hpp"

namespace luminal::rules {
using egraph::Id;
namespace {

// kCheapOnly runs first: it is also every policy's fallback when the policy's own
// producer variant cannot be absorbed (e.g. a view over a GEMM into another GEMM).
enum Policy {
  kCheapOnly,
  kAll,
  kAllNoGemmCopy,
  kSingleUse,
  kNoBroadcast,
  kNoReduce,
  kViews,
  kStored,
  kNoOperandPrologue,
  kNumPolicies
};
// Whether a kernel's result is a half type (f16/bf16: its body rounds to it last).
bool rounds_to_half(const ir::KernelSpec& spec) {
  const auto& nodes = spec.body->nodes;
  const detail::Node& out = nodes[spec.body->outputs.at(0).second];
  return out.dtype == DType::f16 || out.dtype == DType::bf16;
}

// Math nodes per class whose kernels are fused (the representative and the next ones).
constexpr std::size_t kMaxNodesPerClass = 8;

using Variants = KernelsToAdd;

// Kernel node `nd` as a variant: its spec and its slots' classes.
ir::Variant variant_of(const EGraph& g, Id nd) {
  auto kids = g.node(nd).kids;
  return ir::Variant{g.analysis().attrs().get(g.node(nd).payload).kernel,
                     std::vector<Id>(kids.begin(), kids.end())};
}

// Whether a pass that started at `before` nodes and has `pending` variants to add has
// spent its node or time budget.
bool budget_spent(const PassContext& ctx, std::size_t before, std::size_t pending) {
  return before + pending >= ctx.node_limit || std::chrono::steady_clock::now() > ctx.deadline;
}

// Adds each variant to its class and rebuilds; returns the number of new e-nodes (a
// variant already in the e-graph adds none). `what` names the pass and sweep for
// LUMINAL_DEBUG_FUSION.
std::size_t add_variants(EGraph& g, const Variants& todo, const char* what = nullptr, int sweep = 0) {
  const std::size_t added = merge_kernels(g, todo);
  const char* dbg = std::getenv("LUMINAL_DEBUG_FUSION");
  if (what && dbg && *dbg)
    std::fprintf(stderr, "[fusion] %s sweep %d: %zu substitutions, %zu new nodes\n", what, sweep, todo.size(),
                 added);
  return added;
}

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
  // Consumers of each class in the representative program (reachable from the roots,
  // so alternatives the math rules left unused do not count).
  std::unordered_map<Id, int> uses;
  {
    std::vector<Id> stack;
    std::unordered_map<Id, bool> seen;
    if (ctx.roots.empty()) {
      stack = order;
    } else {
      for (Id r : ctx.roots) {
        ++uses[g.find(r)];
        stack.push_back(g.find(r));
      }
    }
    while (!stack.empty()) {
      Id c = stack.back();
      stack.pop_back();
      if (seen[c]) continue;
      seen[c] = true;
      if (rep.best_node(c) == egraph::kNoId) continue;
      auto kids = g.node(rep.best_node(c)).kids;
      std::vector<Id> distinct;
      for (Id k : kids) distinct.push_back(g.find(k));
      std::sort(distinct.begin(), distinct.end());
      distinct.erase(std::unique(distinct.begin(), distinct.end()), distinct.end());
      for (Id k : distinct) {
        ++uses[k];
        stack.push_back(k);
      }
    }
  }

  std::unordered_set<Id> is_root;
  for (Id r : ctx.roots) is_root.insert(g.find(r));

  std::array<std::unordered_map<Id, ir::Variant>, kNumPolicies> best;
  // Per class that is also a slice of a wider class: the direct kernel of that slice (of
  // the widest such class, so Q, K and V all choose the one product of all three).
  std::unordered_map<Id, ir::Variant> slice_of_wider;
  for (Id c : order) {
    double widest = 0;
    for (Id nd : ix.nodes(c, ir::Op::Slice)) {
      const Id src = g.find(g.node(nd).kids[0]);
      double n = 1;
      for (const Dim& d : g.data(src).shape) n *= static_cast<double>(d.as_constant().value_or(4096));
      if (n <= widest) continue;
      if (auto v = ir::lower_node(g, nd); v && ir::is_cheap(*v->spec)) {
        widest = n;
        slice_of_wider.insert_or_assign(c, std::move(*v));
      }
    }
  }
  const char* dbg = std::getenv("LUMINAL_DEBUG_FUSION");
  const bool debug = dbg && *dbg;
  Variants todo;
  const std::size_t budget = ctx.node_limit > g.num_nodes() ? ctx.node_limit - g.num_nodes() : 0;
  for (Id c : order) {
    // The clock per class: one class's variants can take long (a cyclic e-graph's
    // classes hold many members), so checking every 64 overshot the budget by seconds.
    if (todo.size() >= budget || std::chrono::steady_clock::now() > ctx.deadline) break;
    // Every math node of the class, the representative first: a form the algebra found
    // (a reshape where the input program had a sum over a unit axis) fuses too.
    std::vector<Id> members{rep.best_node(c)};
    for (Id nd : ix.nodes(c)) {
      if (members.size() >= kMaxNodesPerClass) break;
      const ir::Op op = g.node(nd).op;
      if (nd != members[0] && op != ir::Op::Kernel && op != ir::Op::Input && op != ir::Op::Param)
        members.push_back(nd);
    }
    for (Id member : members) {
      auto direct = ir::lower_node(g, member);
      if (!direct) continue;
      // The representative's variants under every policy propagate to consumers; the
      // other members add their kAll variant only (bounding the pass's time).
      const bool is_rep = member == members[0];
      for (int p = is_rep ? 0 : kAll; p < (is_rep ? kNumPolicies : kAll + 1); ++p) {
        ir::Variant v = *direct;
        // Slots absorbed producers bring in are tried too (attention: P's kernel brings
        // the score's slot, whose GEMM joins only once both are inside).
        // A slot that failed may succeed once another is absorbed (the three-reduction
        // half of attention is no kernel, the whole is), so a success retries them all.
        std::vector<Id> tried;
        int rounds = 0;
        for (bool again = v.spec->kind != ir::KernelKind::Gather; again && rounds < 32; ++rounds) {
          again = false;
          const std::vector<Id> kids = v.kids;
          for (Id k : kids) {
            if (std::find(tried.begin(), tried.end(), k) != tried.end()) continue;
            tried.push_back(k);
            const ir::Variant* cands[3] = {nullptr, nullptr, nullptr};
            if (auto it = slice_of_wider.find(k); it != slice_of_wider.end() && p == kViews) cands[0] = &it->second;
            if (auto it = best[static_cast<size_t>(p)].find(k); it != best[static_cast<size_t>(p)].end())
              cands[1] = &it->second;
            if (auto it = best[kCheapOnly].find(k); it != best[kCheapOnly].end() && p != kCheapOnly)
              cands[2] = &it->second;
            for (const ir::Variant* prod : cands) {
              if (!prod || prod->spec->kind == ir::KernelKind::Gather) continue;
              auto pos = std::find(v.kids.begin(), v.kids.end(), k);
              if (pos == v.kids.end()) break;
              const auto slot = static_cast<size_t>(pos - v.kids.begin());
              if ((p == kViews || p == kStored) && is_root.count(k) && uses[k] != 1 &&
                  rounds_to_half(*prod->spec))
                continue;
              if (!ir::is_cheap(*prod->spec)) {
                if (p == kCheapOnly) continue;
                // A GEMM with several consumers: only kAll absorbs it (right when every
                // consumer ends up in this kernel, as inside gelu); the others never
                // risk computing it twice.
                if (p != kAll && prod->spec->kind == ir::KernelKind::Gemm && uses[k] != 1) continue;
                if (p == kSingleUse && uses[k] != 1) continue;
                if (p == kNoBroadcast && ir::broadcast_slots(*v.spec)[slot]) continue;
                if (p == kNoReduce && ir::count_reductions(*prod->spec) > 0) continue;
                if (p == kNoOperandPrologue && prod->spec->kind == ir::KernelKind::Elementwise &&
                    (v.spec->kind == ir::KernelKind::Gemm ||
                     v.spec->kind == ir::KernelKind::AttentionTwoPass))
                  continue;
              }
              if (auto nv = ir::substitute(g, v, slot, *prod, ctx.max_body_nodes)) {
                v = std::move(*nv);
                again = true;
                tried.clear();
                break;
              }
              if (debug)
                std::fprintf(stderr,
                             "[fusion] policy %d: class %u cannot absorb class %u (%s, %d reductions)\n", p, c,
                             k, ir::kind_name(prod->spec->kind), ir::count_reductions(*prod->spec));
            }
          }
        }
        if (debug) {
          std::fprintf(stderr, "[fusion] class %u policy %d: %s, %zu nodes, slots", c, p,
                       ir::kind_name(v.spec->kind), v.spec->body->nodes.size());
          for (Id k : v.kids) std::fprintf(stderr, " %u", k);
          std::fprintf(stderr, "\n");
        }
        if (!(*v.spec == *direct->spec)) todo.emplace_back(c, v);
        if (is_rep) best[static_cast<size_t>(p)].emplace(c, std::move(v));
      }
      if (!is_rep) continue;
      // One producer at a time, each of its variants: the combinations the policies above
      // do not make (a GEMM absorbing its epilogue consumer while its own prologue stays
      // materialized, say). These do not propagate to consumers. Two consumers: the
      // direct kernel, and the one that absorbed every producer without a reduction --
      // so that of several reductions feeding an elementwise tail (a residual add of two
      // projections) each may become the kernel's, the tail its epilogue, where the
      // policies absorb the first they meet.
      if (direct->spec->kind == ir::KernelKind::Gather) continue;
      std::vector<const ir::Variant*> consumers{&*direct};
      if (auto it = best[kNoReduce].find(c);
          it != best[kNoReduce].end() && !(*it->second.spec == *direct->spec)) {
        // (only where it reads two or more reductions: one the policies fuse already)
        int reducing = 0;
        for (Id k : it->second.kids)
          if (auto pk = best[kAll].find(k);
              pk != best[kAll].end() && ir::count_reductions(*pk->second.spec) > 0)
            ++reducing;
        if (reducing >= 2) consumers.push_back(&it->second);
      }
      for (const ir::Variant* cons : consumers)
        for (std::size_t slot = 0; slot < cons->kids.size(); ++slot) {
          const Id k = cons->kids[slot];
          std::vector<const ir::Variant*> seen;
          // (the no-reduce consumer takes each producer's variants that recompute nothing
          // under a broadcast or absorb no reduction: a projection over stored operands)
          static constexpr std::array<int, kNumPolicies> kEvery{kCheapOnly, kAll,         kAllNoGemmCopy,
                                                                kSingleUse, kNoBroadcast, kNoReduce,
                                                                kViews,     kStored,      kNoOperandPrologue};
          static constexpr std::array<int, 2> kStoredOperands{kNoBroadcast, kNoReduce};
          const std::span<const int> policies =
              cons == &*direct ? std::span<const int>(kEvery) : std::span<const int>(kStoredOperands);
          for (int p : policies) {
            auto it = best[static_cast<size_t>(p)].find(k);
            if (it == best[static_cast<size_t>(p)].end() || it->second.spec->kind == ir::KernelKind::Gather)
              continue;
            const ir::Variant* prod = &it->second;
            bool dup = false;
            for (const ir::Variant* q : seen) dup = dup || *q->spec == *prod->spec;
            if (dup) continue;
            seen.push_back(prod);
            if (prod->spec->kind == ir::KernelKind::Gemm && uses[k] != 1) continue;
            if (auto nv = ir::substitute(g, *cons, slot, *prod, ctx.max_body_nodes))
              todo.emplace_back(c, std::move(*nv));
          }
        }
    }
  }
  return add_variants(g, todo);
}

// Views and casts between kernels, for absorb-views: a row of three slices (as Q, K and V
// are of a merged product; one strided), read through casts, transposes, reshapes,
// broadcasts and pads by a product, a row reduction and a rounded stored output.
std::shared_ptr<detail::GraphImpl> views_example(std::mt19937_64& rng) {
  auto dim = [&](int64_t lo) { return static_cast<int64_t>(rng() % 8 == 0 ? lo : 1 + rng() % 4); };
  Graph g;
  const int64_t s = dim(0), d = dim(1);
  const std::array<DType, 3> types{DType::f32, DType::f16, DType::bf16};
  const DType dt = types[rng() % 3];
  Tensor x = g.input("x", {s, 3 * d}, dt);
  Tensor a = cast(slice(x, 1, 0, d), DType::f32), b = cast(slice(x, 1, d, 2 * d), DType::f32);
  Tensor c = slice(x, 1, 2 * d, 3 * d);
  if (rng() % 2) c = slice(x, 1, 2, 3 * d, 3);  // every third column from the third
  g.output("y_rounded", cast(cast(c, DType::f32), types[rng() % 3]));
  switch (rng() % 3) {
    case 0:
      g.output("y", reshape(matmul(a, transpose(b, 0, 1)), {s * s}));
      break;
    case 1:
      g.output("y",
               transpose(sum(reshape(a, {s, 1, d}) * reshape(cast(c, DType::f32), {1, s, d}), {0}), 0, 1));
      break;
    default:
      g.output("y", max(pad(expand(reshape(b, {1, s, d}), {2, s, d}), {{0, 0}, {1, 0}, {0, 1}}, -1.5f), {2}) +
                        float(rng() % 3));
      break;
  }
  return g.impl();
}

// A reshape or a permute loses nothing: X = v^-1(v(X)). For each class X a kernel of the
// program reads, and each class Y the program computes that is a chain of such views of X
// (up to three), a kernel node of X reading Y through the inverted chain. The kernels
// reading X may then read Y's buffer (absorb_views takes the new kernel like any view),
// and X need not be written when Y is anyway: the decode step's new V row, returned in
// head layout and read by the attention in the product's layout, is written once. Without
// a focus (the checker) every class read and every class computed.
std::size_t read_views_back(EGraph& g, const PassContext& ctx, const std::unordered_set<Id>& focus) {
  constexpr int kMaxViewChain = 3;
  if (!g.is_clean()) g.rebuild();
  const auto& ix = g.index();
  // The lossless views of each class: (the class holding the view, the view node).
  std::unordered_map<Id, std::vector<std::pair<Id, ir::AttrNode>>> views_of;
  for (Id p : ix.classes())
    for (const ir::AttrNode& an : g.data(p).attributed)
      if ((an.op == ir::Op::Reshape || an.op == ir::Op::Permute) && g.find(an.kid) != p)
        views_of[g.find(an.kid)].emplace_back(p, an);
  std::unordered_set<Id> computed, read;
  for (Id c : ix.classes_with(ir::Op::Kernel))
    for (Id nd : ix.nodes(c, ir::Op::Kernel)) {
      if (!focus.empty() && !focus.count(nd)) continue;
      computed.insert(c);
      for (Id k : g.node(nd).kids) read.insert(g.find(k));
    }
  // A chain step: the view node and the class below it.
  using Chain = std::vector<std::pair<ir::AttrNode, Id>>;
  Variants todo;
  for (Id x : read) {
    std::vector<std::pair<Id, Chain>> frontier{{x, {}}};
    std::unordered_set<Id> seen{x};
    for (int depth = 0; depth < kMaxViewChain && !frontier.empty(); ++depth) {
      std::vector<std::pair<Id, Chain>> next;
      for (const auto& [below, chain] : frontier) {
        auto it = views_of.find(below);
        if (it == views_of.end()) continue;
        for (const auto& [y, view] : it->second) {
          if (!seen.insert(y).second) continue;
          Chain up = chain;
          up.emplace_back(view, below);
          if (computed.count(y)) {
            ir::BodyBuilder b(g);
            uint32_t v = b.slot(y);
            for (std::size_t i = up.size(); i-- > 0;) {
              ir::Attr at;
              if (up[i].first.op == ir::Op::Reshape) {
                at.shape = g.data(up[i].second).shape;
              } else {
                const std::vector<int> p = g.analysis().attrs().get(up[i].first.payload).perm;
                at.perm.assign(p.size(), 0);
                for (std::size_t k = 0; k < p.size(); ++k)
                  at.perm[static_cast<std::size_t>(p[k])] = static_cast<int>(k);
              }
              v = b.emit_op(up[i].first.op, at, {v});
            }
            if (auto var = b.finish(v, ctx.max_body_nodes)) todo.emplace_back(x, std::move(*var));
          }
          next.emplace_back(y, std::move(up));
        }
      }
      frontier = std::move(next);
    }
  }
  return add_variants(g, todo, "read-views-back");
}

// The reverse of absorbing a producer: a kernel whose body computes what another kernel
// of the program computes reads that one's class instead,
//   kernel(.., body with f(P), ..) = kernel(.., slot f(P), ..) where class Y = f(P),
// so a value the program stores anyway (an output: the decode step's new V row, rounded
// to f16 and returned in head layout) is not computed a second time inside a kernel that
// absorbed it along another edge (the attention staging the same row off the Q|K|V
// product). Found node for node (ir::read_computed), for each kernel of the program and
// each kernel of another class of the program reading only classes it reads. Without a
// focus (the checker) every pair of kernel nodes.
std::size_t read_program_values(EGraph& g, const PassContext& ctx, const std::unordered_set<Id>& focus) {
  if (!g.is_clean()) g.rebuild();
  const auto& ix = g.index();
  std::vector<std::pair<Id, ir::Variant>> kernels;  // (class, kernel) of the program
  for (Id c : ix.classes_with(ir::Op::Kernel))
    for (Id nd : ix.nodes(c, ir::Op::Kernel)) {
      if (!focus.empty() && !focus.count(nd)) continue;
      ir::Variant v = variant_of(g, nd);
      if (v.spec->kind != ir::KernelKind::Gather) kernels.emplace_back(c, std::move(v));
    }
  Variants todo;
  for (const auto& [kc, k] : kernels) {
    std::unordered_set<Id> reads;
    for (Id x : k.kids) reads.insert(g.find(x));
    for (const auto& [yc, y] : kernels) {
      if (yc == kc || reads.count(yc) ||
          !std::all_of(y.kids.begin(), y.kids.end(), [&](Id x) { return reads.count(g.find(x)) > 0; }))
        continue;
      if (auto v = ir::read_computed(g, k, yc, y, ctx.max_body_nodes)) todo.emplace_back(kc, std::move(*v));
    }
  }
  return add_variants(g, todo, "read-program-values");
}

// Every kernel node absorbs every arithmetic-free kernel node (views, casts, index masks:
// ir::is_cheap) of each of its slots' classes. This is fuse-producers' equality,
//   kernel(.., slot P, ..) = kernel(.., P's body, ..),
// for every pair of e-nodes instead of along one representative per class: a form the
// algebra found anywhere -- V as a slice of the merged Q|K|V product, an attention output
// as a reshape of the attention's -- reaches the kernels that read the class, whichever
// variants they are. Absorbing such a producer recomputes no arithmetic (a cast is one
// instruction per element read), so each pair is offered and the extractor decides.
// Sweeps compose chains of views (a kernel absorbs P, then what P's own slot holds); a
// sweep after the first tries only the producers the previous one added.
//
// Applied to every pair it grows a decoder block's e-graph about eight times over (each
// fused variant times each view spelling of each operand), so the search applies it as a
// guided pass (RuleInfo::guided): to the kernels of the program it extracted
// (PassContext::focus), then extracts again. The checker applies it everywhere.
std::size_t absorb_views(EGraph& g, const PassContext& ctx) {
  constexpr int kSweeps = 3;
  const std::size_t before = g.num_nodes();
  const std::unordered_set<Id> focus(ctx.focus.begin(), ctx.focus.end());
  read_views_back(g, ctx, focus);
  read_program_values(g, ctx, focus);
  // Node ids at or above `fresh_from` were added by the previous sweep (ids only grow).
  std::size_t fresh_from = 0;
  for (int sweep = 0; sweep < kSweeps; ++sweep) {
    if (!g.is_clean()) g.rebuild();
    const auto& ix = g.index();
    // The arithmetic-free kernels of each class, with whether each is fresh. Of those
    // reading the same slots only the smallest body: they compute the same value from the
    // same buffers (the movement rules make many spellings of one view).
    std::unordered_map<Id, std::vector<std::pair<ir::Variant, bool>>> cheap;
    for (Id c : ix.classes_with(ir::Op::Kernel))
      for (Id nd : ix.nodes(c, ir::Op::Kernel)) {
        ir::Variant v = variant_of(g, nd);
        if (v.spec->kind == ir::KernelKind::Gather || !ir::is_cheap(*v.spec)) continue;
        auto& list = cheap[c];
        auto same =
            std::find_if(list.begin(), list.end(), [&](const auto& e) { return e.first.kids == v.kids; });
        if (same == list.end())
          list.emplace_back(std::move(v), nd >= fresh_from);
        else if (v.spec->body->nodes.size() < same->first.spec->body->nodes.size())
          *same = {std::move(v), nd >= fresh_from};
      }
    Variants todo;
    bool out_of_budget = false;
    for (Id c : ix.classes_with(ir::Op::Kernel)) {
      if ((out_of_budget = budget_spent(ctx, before, todo.size()))) break;
      for (Id nd : ix.nodes(c, ir::Op::Kernel)) {
        if (!focus.empty() && !focus.count(nd)) continue;
        const ir::Variant k = variant_of(g, nd);
        if (k.spec->kind == ir::KernelKind::Gather) continue;
        const bool k_fresh = nd >= fresh_from;
        for (std::size_t slot = 0; slot < k.kids.size(); ++slot) {
          auto it = cheap.find(g.find(k.kids[slot]));
          if (it == cheap.end()) continue;
          for (const auto& [p, p_fresh] : it->second)
            if (sweep == 0 || (p_fresh && !k_fresh))
              if (auto nv = ir::substitute(g, k, slot, p, ctx.max_body_nodes))
                todo.emplace_back(c, std::move(*nv));
        }
      }
    }
    fresh_from = g.num_node_ids();
    // Nothing new means every pair was there already.
    if (add_variants(g, todo, "absorb-views", sweep) == 0 || out_of_budget) break;
  }
  return g.num_nodes() - before;
}

// fuse-producers' equality again, kernel(.., slot P, ..) = kernel(.., P's body, ..), for
// any producer -- arithmetic too -- along the edges of the program the search extracted:
// each of its kernels (PassContext::focus) absorbs the kernel that program computes for
// one of its slots, and in the next sweeps the kernels so made absorb another, so a
// consumer with producers P1..Pk gets every subset of them (up to three). Which ones pay
// (a producer another kernel also reads is recomputed; a GEMM absorbed as a prologue is
// paid per use) is the extractor's question, as for every other rule; repeated guided
// rounds (search.cpp) fuse chains one edge further each. A producer that makes no legal
// kernel with the consumer is offered with one of its own producers nested in it
// (ir::nest): a chain whose middle link is no kernel alone -- the product of a softmax
// and V takes the softmax and the scores at once, an attention, where the softmax cannot
// hold the scores' reduction and the product cannot hold the softmax's. The fusion
// policies build their variants from the representative node of each class; this offers
// what an extracted program's own kernels would become, whichever variants they are.
//
// Applied to every pair of e-nodes it would fuse every variant with every variant
// (exponential in a chain's length); the checker applies it to every pair of its small
// instances.
//
// The program's kernels are not the only consumers: a class of the program that is also a
// slice of a wider class (Q, K and V of one Q|K|V product: matmul-siblings) has that
// product as an alternative no extracted program computes yet -- it only pays once it
// takes what the three separate products took, RMSNorm as its prologue. So the wider
// class's kernel (PassContext::wider) is a consumer too, and absorbs for each slot the
// program's kernel or, off the program, the slot class's smallest kernel with its own
// off-program slots absorbed in turn (the concatenated weights from the weights, the
// normalization from x; of a class's kernels the one with fewest slots off the program,
// so the normalization comes from the program's). And the program's consumers of such a
// class -- or of a view or cast of one, or of a class a reshape of which is one -- get
// variants reading it off the wider product's buffer, so the extraction can move Q, K and
// V onto the merged product at once. The extractor then weighs it against the three.
// Where the program reaches a wider product only through elementwise functions of its
// slices (SwiGLU inside one row kernel of gate and up: PassContext::
// wider_through_elementwise), its operation also gets a variant computing them inline off
// the slices (OffProgram::computed_off_wider).
//
// The checker applies the pass both to every pair of kernel nodes and, on every other
// example, as the search does: to the program it extracts after merging sibling products
// (check_support.cpp; on half of those after the fusion policies, as the default search
// extracts it), so what it does only for a program is checked too.
//
// Sharded programs (several ranks) too. It used to be off there: on tensor_parallel_test's
// 2-rank decode step (D = 512) it made one layer's attention whole on every rank, no
// all_reduce and no gathered K/V rows, priced 3% cheaper and measured 9-10% dearer
// (interleaved in one process). The price was the cost model's: each rank's kernels were
// priced as if it had the host to itself (per_rank_share, cost/target_desc.hpp); priced
// as a rank's share, the plan it leads to keeps Megatron's collectives and measured as
// Megatron's without it, within the host's spread (docs/distributed.md).
// How deep a wider consumer's off-program producers are absorbed into one another.
constexpr int kMaxOffProgramDepth = 8;
// How many views and casts lead from a class of the program to a slice of a wider one.
constexpr int kMaxViewDepth = 4;
// How deep an elementwise subtree over such slices (SiLU of one: five operations between
// two pairs of casts) is computed together.
constexpr int kMaxElementwiseDepth = 10;

// One sweep of absorb-producers over an extracted program: the kernels it makes for
// classes off the program (memoized for the sweep; each one made joins `todo`, as an
// equality of its own class).
struct OffProgram {
  EGraph& g;
  const PassContext& ctx;
  const std::unordered_set<Id>& program_classes;
  const std::unordered_set<Id>& wider_classes;  ///< classes of PassContext::wider
  /// classes of PassContext::wider_through_elementwise
  const std::unordered_set<Id>& elementwise_wider;
  int sweep;
  std::size_t fresh_from;  ///< node ids from here on were made by the previous sweep
  Variants& todo;
  bool debug;
  std::unordered_map<Id, std::optional<ir::Variant>> absorbed{}, read_wider{}, computed_wider{}, constants{};
  std::unordered_map<Id, std::vector<Id>> reshaped_as{};  ///< per class, the classes holding a reshape of it
  int elementwise_levels = 0;                             ///< elementwise_off_wider calls in progress

  // Whether class `c` takes a kernel the program does not run: not the program's, not an
  // input or a parameter (read-views-back gives those kernels too: wq as a transpose of
  // the transposed weight), and computed by some kernel.
  bool computed_off_program(Id c) const {
    return !program_classes.count(c) && !ir::is_leaf_class(g, c) &&
           !g.index().nodes(c, ir::Op::Kernel).empty();
  }

  // A class off the program, as a wider consumer absorbs it: each of its few kernels with
  // fewest slots off the program (then the smallest), with every slot that is itself off
  // the program absorbed in turn (recursively, down to what the program computes and the
  // leaves) -- the merged product's concatenated weights from the weights, its operand's
  // normalization from x -- and of the results the one left reading fewest classes off
  // the program, then the smallest. (The smallest kernel alone led away from what the
  // program computes: of normalized x's kernels, a reshape of another spelling of it whose
  // own producers keep the mean of squares a slot, so the merged Q|K|V product read a
  // statistic nothing computes where the three products it replaces computed it inline.)
  const ir::Variant* kernel(Id c, int depth) {
    constexpr std::size_t kCandidates = 4;
    const auto& ix = g.index();
    if (auto it = absorbed.find(c); it != absorbed.end()) return it->second ? &*it->second : nullptr;
    absorbed[c] = std::nullopt;  // (in progress: a cycle through views ends here)
    auto off_slots = [&](const auto& kids) {
      std::size_t off = 0;
      for (Id k : kids) off += computed_off_program(g.find(k));
      return off;
    };
    std::vector<std::tuple<std::size_t, std::size_t, Id>> keys;  // (slots off, body size, node)
    for (Id nd : ix.nodes(c, ir::Op::Kernel)) {
      if (sweep > 0 && nd >= fresh_from) continue;
      const auto& spec = *g.analysis().attrs().get(g.node(nd).payload).kernel;
      if (spec.kind == ir::KernelKind::Gather || !spec.launch.empty()) continue;
      const auto kids = g.node(nd).kids;
      // (a kernel reading its own class -- a view absorbed with its inverse -- is no way to
      // compute it)
      if (std::any_of(kids.begin(), kids.end(), [&](Id k) { return g.find(k) == c; })) continue;
      keys.emplace_back(off_slots(kids), spec.body->nodes.size(), nd);
    }
    std::sort(keys.begin(), keys.end());
    if (keys.size() > kCandidates) keys.resize(kCandidates);
    std::optional<ir::Variant> best;
    std::pair<std::size_t, std::size_t> best_key;  // (slots off, body size)
    for (const auto& key : keys) {
      ir::Variant v = variant_of(g, std::get<2>(key));
      std::vector<Id> tried;
      for (bool again = depth < kMaxOffProgramDepth; again;) {
        again = false;
        for (std::size_t slot = 0; slot < v.kids.size(); ++slot) {
          const Id kc = g.find(v.kids[slot]);
          if (!computed_off_program(kc) || std::find(tried.begin(), tried.end(), kc) != tried.end()) continue;
          tried.push_back(kc);
          const ir::Variant* p = kernel(kc, depth + 1);
          if (!p) continue;
          if (auto nv = ir::substitute(g, v, slot, *p, ctx.max_body_nodes)) {
            v = std::move(*nv);
            again = true;
            break;
          }
        }
      }
      const std::pair<std::size_t, std::size_t> k{off_slots(v.kids), v.spec->body->nodes.size()};
      if (!best || k < best_key) {
        best = std::move(v);
        best_key = k;
      }
    }
    if (!best) return nullptr;
    todo.emplace_back(c, *best);  // (a kernel the e-graph holds already adds nothing)
    auto& slot = absorbed[c];
    slot = std::move(best);
    return &*slot;
  }

  // A class of the program read through a slice of a wider class (the merged product the
  // program does not compute): the slice's kernel under the views and casts that lead
  // from the class down to the slice (a decode step's f16 K row is a cast of reshapes of
  // K), or reshaped back from a class that is a reshape of this one and reads the wider
  // product (the matvec [1, 1024, 1] the algebra spelled the K row as is a reshape away
  // from K = slice(Q|K|V); permutes too made no plan differ) -- so a consumer can read the
  // merged product's buffer instead of the class's own.
  const ir::Variant* through_wider(Id c, int depth) {
    const auto& ix = g.index();
    if (auto it = read_wider.find(c); it != read_wider.end()) return it->second ? &*it->second : nullptr;
    read_wider[c] = std::nullopt;  // (in progress: a cycle of views ends here)
    std::optional<ir::Variant> found;
    for (Id nd : ix.nodes(c)) {
      const auto& n = g.node(nd);
      const bool slice = n.op == ir::Op::Slice;
      if (slice ? !wider_classes.count(g.find(n.kids[0]))
                : depth >= kMaxViewDepth || (!ir::is_view(n.op) && n.op != ir::Op::Cast))
        continue;
      const ir::Variant* under = slice ? nullptr : through_wider(g.find(n.kids[0]), depth + 1);
      if (!slice && !under) continue;
      auto v = ir::lower_node(g, nd);
      if (!v || !ir::is_cheap(*v->spec)) continue;
      if (slice) {
        found = std::move(*v);
        break;
      }
      const auto pos =
          std::find_if(v->kids.begin(), v->kids.end(), [&](Id k) { return g.find(k) == g.find(n.kids[0]); });
      if (pos == v->kids.end()) continue;
      if (auto nv = ir::substitute(g, *v, static_cast<std::size_t>(pos - v->kids.begin()), *under,
                                   ctx.max_body_nodes)) {
        found = std::move(*nv);
        break;
      }
    }
    if (!found && depth < kMaxViewDepth)
      if (auto it = reshaped_as.find(c); it != reshaped_as.end())
        for (Id parent_class : it->second) {
          const ir::Variant* parent = through_wider(g.find(parent_class), depth + 1);
          if (!parent) continue;
          ir::Attr back;
          back.shape = g.data(c).shape;
          ir::BodyBuilder b(g);
          const uint32_t root = b.copy(*parent->spec->body, parent->kids);
          if (auto v = b.finish(b.emit_op(ir::Op::Reshape, back, {root}), ctx.max_body_nodes);
              v && ir::is_cheap(*v->spec)) {
            found = std::move(*v);
            break;
          }
        }
    auto& slot = read_wider[c];
    slot = std::move(found);
    return slot ? &*slot : nullptr;
  }

  // Substitutes `with(slot class)` into every slot of `v` that `which(slot class)`
  // accepts (where `with` gives a kernel); each substitution moves the slots, so each pass
  // starts over (one per slot). Whether any was substituted.
  template <class Which, class With>
  bool each_slot(ir::Variant& v, Which which, With with) const {
    bool any = false;
    for (bool again = true; again;) {
      again = false;
      for (std::size_t slot = 0; slot < v.kids.size() && !again; ++slot) {
        const Id kc = g.find(v.kids[slot]);
        if (!which(kc)) continue;
        if (const ir::Variant* r = with(kc))
          if (auto nv = ir::substitute(g, v, slot, *r, ctx.max_body_nodes)) {
            v = std::move(*nv);
            any = again = true;
          }
      }
    }
    return any;
  }

  // Class `c` read off a wider product (through_wider), or computed from such reads by
  // an elementwise subtree (elementwise_off_wider) -- never a class the program stores:
  // its readers read it.
  const ir::Variant* computed_off_wider(Id c) {
    if (const ir::Variant* r = through_wider(c, 0)) return r;
    if (auto it = computed_wider.find(c); it != computed_wider.end())
      return it->second ? &*it->second : nullptr;
    computed_wider[c] = std::nullopt;  // (in progress: a cycle ends here)
    std::optional<ir::Variant> found;
    if (!program_classes.count(c) && elementwise_levels < kMaxElementwiseDepth)
      for (Id nd : g.index().nodes(c)) {
        const ir::Op op = g.node(nd).op;
        const bool view = (ir::is_view(op) || op == ir::Op::Cast) && op != ir::Op::Slice;
        if (!view && !ir::is_elementwise(op)) continue;
        ++elementwise_levels;
        found = elementwise_off_wider(nd);
        --elementwise_levels;
        if (found) break;
      }
    auto& slot = computed_wider[c];
    slot = std::move(found);
    return slot ? &*slot : nullptr;
  }

  // Elementwise node (or view, or cast) `nd` lowered with each operand read off a wider
  // product (through views, casts and further elementwise nodes) or inlined where it is a
  // constant: SiLU of the gate slice of the merged gate|up product, a small subtree
  // computed together. nullopt unless some operand reads a wider product, every other one
  // is a constant, and the subtree computes something (views alone are through_wider's).
  std::optional<ir::Variant> elementwise_off_wider(Id nd) {
    auto v = ir::lower_node(g, nd);
    if (!v) return std::nullopt;
    const auto wide = [&](Id kc) { return wider_classes.count(kc) > 0; };
    each_slot(
        *v, [&](Id kc) { return !wide(kc); },
        [&](Id kc) {
          const ir::Variant* r = computed_off_wider(kc);
          return r ? r : constant_kernel(kc);
        });
    // (every slot read off a wider product, and one at least: the constants are inlined)
    if (v->kids.empty() ||
        !std::all_of(v->kids.begin(), v->kids.end(), [&](Id k) { return wide(g.find(k)); }) ||
        v->spec->kind != ir::KernelKind::Elementwise || ir::is_cheap(*v->spec))
      return std::nullopt;
    return v;
  }

  // A kernel with no slots computing constant class `c` (a broadcast scalar: SiLU's 1 and
  // log2(e)), from its constants and views of them (memoized for the sweep).
  const ir::Variant* constant_kernel(Id c) {
    auto [it, fresh] = constants.try_emplace(c);
    if (fresh) it->second = constant_kernel(c, 0);
    return it->second ? &*it->second : nullptr;
  }
  std::optional<ir::Variant> constant_kernel(Id c, int depth) const {
    if (!g.data(c).constant || depth > kMaxViewDepth) return std::nullopt;
    for (Id nd : g.index().nodes(c)) {
      const ir::Op op = g.node(nd).op;
      if (op == ir::Op::Kernel || (!ir::is_view(op) && !g.node(nd).kids.empty())) continue;
      auto v = ir::lower_node(g, nd);
      while (v && !v->kids.empty()) {
        auto under = constant_kernel(g.find(v->kids[0]), depth + 1);
        v = under ? ir::substitute(g, *v, 0, *under, ctx.max_body_nodes) : std::nullopt;
      }
      if (v) return v;
    }
    return std::nullopt;
  }

  // Class `c` of the program's own operations (its math nodes, lowered) reading their
  // operands off the wider products, where the program's kernel computes an operand
  // inside and reads none (Q's product inside its RoPE kernel): as they are, and with the
  // wider product's kernel absorbed where that is a legal kernel (an operation over one
  // slice then computes that slice's rows of the product, with the prologue the wider
  // kernel took). (The program's kernels read their slots so in absorb_producers' sweep.)
  void read_off_wider(Id c) {
    const auto& ix = g.index();
    std::size_t members = 0;
    for (Id nd : ix.nodes(c)) {
      const ir::Op op = g.node(nd).op;
      if (op == ir::Op::Kernel || op == ir::Op::Input || op == ir::Op::Param) continue;
      if (++members > kMaxNodesPerClass) break;
      auto direct = ir::lower_node(g, nd);
      if (!direct || direct->spec->kind == ir::KernelKind::Gather) continue;
      const auto wide = [&](Id kc) { return wider_classes.count(kc) > 0; };
      // The operation as it is, reading its operands off the wider product, and (where it
      // also reads classes the program's kernel of `c` computes inside as elementwise
      // functions of slices: SiLU of the gate slice) those computed inline too; each also
      // with the wider product absorbed.
      auto offer = [&](ir::Variant v, const char* how) {
        if (debug) {
          std::fprintf(stderr, "[fusion] c%u (%s) %s a wider product: slots", c, ir::op_name(g.node(nd).op),
                       how);
          for (Id k : v.kids) std::fprintf(stderr, " c%u", g.find(k));
          std::fprintf(stderr, "\n");
        }
        todo.emplace_back(c, v);
        if (!each_slot(v, wide, [&](Id kc) { return kernel(kc, 0); })) return;
        if (debug)
          std::fprintf(stderr, "[fusion] c%u computes a wider product: %s, %zu nodes\n", c,
                       ir::kind_name(v.spec->kind), v.spec->body->nodes.size());
        todo.emplace_back(c, std::move(v));
      };
      ir::Variant v = std::move(*direct);
      const bool viewed = each_slot(
          v, [&](Id kc) { return !wide(kc); }, [&](Id kc) { return through_wider(kc, 0); });
      if (viewed) offer(v, "reads off");
      // (only off products the program reaches through such functions alone: where it
      // computes a slice of one as a kernel, that kernel's readers read the slice)
      if (each_slot(
              v, [&](Id kc) { return !wide(kc); }, [&](Id kc) { return computed_off_wider(kc); }) &&
          std::all_of(v.kids.begin(), v.kids.end(),
                      [&](Id k) { return !wide(g.find(k)) || elementwise_wider.count(g.find(k)); }))
        offer(std::move(v), "computes from");
    }
  }
};

// Sibling kernels of the program -- two kernels with reductions that read a common slot,
// the gate and up products of a feed-forward over one normalized x -- combined where
// something off the program reads both: for each class the program does not compute that
// holds an elementwise node over two classes it does (SwiGLU's silu(gate) * up, which the
// program computes inside the down product's prologue), that node lowered with both
// producers absorbed, one kernel with both reductions where a kernel kind holds them (a
// row reduction). The kernels reading the class (their lowered variants) can then read
// it; the extractor weighs one launch against two. (Unfocused -- the checker -- any two
// kernels with reductions: the equality holds whether or not they share a slot.)
void combine_siblings(EGraph& g, const PassContext& ctx,
                      const std::unordered_map<Id, std::vector<Id>>& producer,
                      const std::unordered_set<Id>& program_classes, Variants& todo) {
  const auto& ix = g.index();
  // Functions of a producer per class, and combined variants per node: a few (the checker,
  // unfocused, has every kernel node of a class as a producer).
  constexpr std::size_t kMaxPerClass = 4;
  // The program's kernels computing class `c`: its own, or an elementwise function of one
  // (a kernel of `c` over one class the program computes, the producer absorbed: SiLU of
  // the gate product, or a view of a product whose output carries a unit axis the
  // elementwise node does not).
  std::unordered_map<Id, std::vector<ir::Variant>> memo;
  auto computing = [&](Id c) -> const std::vector<ir::Variant>& {
    auto [it, fresh] = memo.try_emplace(c);
    if (!fresh) return it->second;
    std::vector<ir::Variant> out;
    if (auto p = producer.find(c); p != producer.end()) {
      for (Id nd : p->second) out.push_back(variant_of(g, nd));
    } else {
      for (Id nd : ix.nodes(c, ir::Op::Kernel)) {
        if (out.size() >= kMaxPerClass) break;
        const ir::Variant v = variant_of(g, nd);
        if (v.kids.size() != 1 || v.spec->kind != ir::KernelKind::Elementwise) continue;
        auto q = producer.find(g.find(v.kids[0]));
        if (q == producer.end()) continue;
        if (auto w = ir::substitute(g, v, 0, variant_of(g, q->second.front()), ctx.max_body_nodes))
          out.push_back(std::move(*w));
      }
    }
    return it->second = std::move(out);
  };
  auto shares_slot = [&](const ir::Variant& a, const ir::Variant& b) {
    for (Id x : a.kids)
      for (Id y : b.kids)
        if (g.find(x) == g.find(y)) return true;
    return false;
  };
  auto slot_of = [&](const ir::Variant& v, Id cls) {
    for (std::size_t i = 0; i < v.kids.size(); ++i)
      if (g.find(v.kids[i]) == cls) return static_cast<int>(i);
    return -1;
  };
  for (Id c : ix.classes()) {
    if (program_classes.count(c)) continue;
    for (Id nd : ix.nodes(c)) {
      const ir::NodeView n = g.node(nd);
      if (!ir::is_binary(n.op) || n.kids.size() != 2) continue;
      const Id a = g.find(n.kids[0]), b = g.find(n.kids[1]);
      if (a == b) continue;
      const std::vector<ir::Variant>&ka_all = computing(a), &kb_all = computing(b);
      if (ka_all.empty() || kb_all.empty()) continue;
      const auto base = ir::lower_node(g, nd);
      if (!base) continue;
      std::size_t made = 0;
      for (const ir::Variant& ka : ka_all)
        for (const ir::Variant& kb : kb_all) {
          if (made >= kMaxPerClass) break;
          if (ir::count_reductions(*ka.spec) == 0 || ir::count_reductions(*kb.spec) == 0 ||
              (!program_classes.empty() && !shares_slot(ka, kb)))
            continue;
          const int sa = slot_of(*base, a);
          if (sa < 0) continue;
          auto with_a = ir::substitute(g, *base, static_cast<std::size_t>(sa), ka, ctx.max_body_nodes);
          if (!with_a) continue;
          const int sb = slot_of(*with_a, b);
          if (sb < 0) continue;
          if (auto both = ir::substitute(g, *with_a, static_cast<std::size_t>(sb), kb, ctx.max_body_nodes)) {
            todo.emplace_back(c, std::move(*both));
            ++made;
          }
        }
    }
  }
}

std::size_t absorb_producers(EGraph& g, const PassContext& ctx) {
  constexpr int kSweeps = 3;
  const std::size_t before = g.num_nodes();
  const std::unordered_set<Id> focus(ctx.focus.begin(), ctx.focus.end());
  const std::unordered_set<Id> wider(ctx.wider.begin(), ctx.wider.end());
  std::unordered_set<Id> wider_classes, elementwise_wider;
  const char* dbg = std::getenv("LUMINAL_DEBUG_FUSION");
  const bool debug = dbg && *dbg;
  if (debug && !wider.empty()) {
    std::fprintf(stderr, "[fusion] absorb-producers: wider consumers");
    for (Id w : ctx.wider) std::fprintf(stderr, " n%u (c%u)", w, g.find(w));
    std::fprintf(stderr, "\n");
  }
  std::unordered_set<Id> program_classes;
  for (Id nd : ctx.focus) program_classes.insert(g.find(nd));
  // Node ids at or above `fresh_from` were added by the previous sweep (ids only grow):
  // the consumers of the next one.
  std::size_t fresh_from = 0;
  // What read_off_wider made in the first sweep (the program's operations reading their
  // operands off a wider product).
  Variants off_wider;
  for (int sweep = 0; sweep < kSweeps; ++sweep) {
    if (!g.is_clean()) g.rebuild();
    const auto& ix = g.index();
    if (sweep == 0) {
      for (Id w : ctx.wider) wider_classes.insert(g.find(w));
      for (Id w : ctx.wider_through_elementwise) elementwise_wider.insert(g.find(w));
    }
    // The producers: per class, its kernel of the program (every kernel without a focus).
    std::unordered_map<Id, std::vector<Id>> producer;
    for (Id c : ix.classes_with(ir::Op::Kernel))
      for (Id nd : ix.nodes(c, ir::Op::Kernel))
        if (nd < fresh_from || sweep == 0)
          if (focus.empty() || focus.count(nd)) producer[c].push_back(nd);
    Variants todo;
    OffProgram off_program{g,    ctx,  program_classes, wider_classes, elementwise_wider, sweep, fresh_from,
                           todo, debug};
    bool out_of_budget = false;
    // (every sweep: unfocused, the siblings share a slot only once each absorbed its
    // operands' views in an earlier sweep)
    {
      const std::size_t n0 = todo.size();
      combine_siblings(g, ctx, producer, program_classes, todo);
      if (debug) std::fprintf(stderr, "[fusion] combine-siblings: %zu variants\n", todo.size() - n0);
    }
    if (sweep == 0 && !wider_classes.empty()) {
      for (Id c : ix.classes())
        for (Id nd : ix.nodes(c, ir::Op::Reshape))
          off_program.reshaped_as[g.find(g.node(nd).kids[0])].push_back(c);
      const std::size_t n0 = todo.size();
      for (Id c : program_classes) {
        if ((out_of_budget = budget_spent(ctx, before, todo.size()))) break;
        off_program.read_off_wider(c);
      }
      off_wider.assign(todo.begin() + static_cast<std::ptrdiff_t>(n0), todo.end());
    }
    // Per wider class, reads off it alone: the algebra spells a merged product more than
    // one way (the sm_90 block at 128 tokens has several classes of the merged gate|up
    // product), and a variant reading one slot off each computes them all.
    std::vector<std::unordered_set<Id>> one_wider;
    std::vector<OffProgram> off_one_wider;
    if (sweep == 0) {
      one_wider.reserve(wider_classes.size());
      off_one_wider.reserve(wider_classes.size());
      for (Id w : wider_classes) {
        one_wider.push_back({w});
        off_one_wider.push_back(OffProgram{g, ctx, program_classes, one_wider.back(), elementwise_wider,
                                           sweep, fresh_from, todo, debug});
        off_one_wider.back().reshaped_as = off_program.reshaped_as;
      }
    }
    // The program's kernels absorb those for their slots in the next sweep (its consumers
    // are otherwise only the nodes the previous sweep made): an operation over slices of
    // the merged product pays only once its reader takes it in -- SwiGLU off the merged
    // gate|up product, inside the down product, instead of the kernel computing both.
    if (sweep == 1)
      for (Id nd : ctx.focus) {
        const ir::Variant k = variant_of(g, nd);
        if (k.spec->kind == ir::KernelKind::Gather) continue;
        for (std::size_t slot = 0; slot < k.kids.size(); ++slot)
          for (const auto& [pc, p] : off_wider)
            if (g.find(pc) == g.find(k.kids[slot]))
              if (auto nv = ir::substitute(g, k, slot, p, ctx.max_body_nodes))
                todo.emplace_back(g.find(nd), std::move(*nv));
      }
    for (Id c : ix.classes_with(ir::Op::Kernel)) {
      if (out_of_budget || (out_of_budget = budget_spent(ctx, before, todo.size()))) break;
      for (Id nd : ix.nodes(c, ir::Op::Kernel)) {
        if (sweep == 0 ? !focus.empty() && !focus.count(nd) && !wider.count(nd) : nd < fresh_from) continue;
        const ir::Variant k = variant_of(g, nd);
        if (k.spec->kind == ir::KernelKind::Gather) continue;
        // (a consumer the program does not compute: a wider kernel, or one made from it)
        const bool off = !focus.empty() && !program_classes.count(c);
        // A kernel of the program reading every slot it can off one wider product at
        // once (the attention reading Q, K and V off the merged Q|K|V product: the merged
        // product pays only once all three readers take it; one slot at a time below).
        if (sweep == 0 && focus.count(nd))
          for (OffProgram& one : off_one_wider) {
            ir::Variant all = k;
            if (one.each_slot(
                    all, [&](Id kc) { return !one.wider_classes.count(kc); },
                    [&](Id kc) { return one.through_wider(kc, 0); }))
              todo.emplace_back(c, std::move(all));
          }
        for (std::size_t slot = 0; slot < k.kids.size(); ++slot) {
          const Id kc = g.find(k.kids[slot]);
          // (a kernel of the program reading the slot off the wider product it is a slice
          // of: the attention reading the K row off the merged Q|K|V product)
          if (sweep == 0 && !wider_classes.empty() && focus.count(nd))
            if (const ir::Variant* r = off_program.through_wider(kc, 0))
              if (auto nv = ir::substitute(g, k, slot, *r, ctx.max_body_nodes)) {
                if (debug) std::fprintf(stderr, "[fusion] n%u reads c%u off a wider product\n", nd, kc);
                todo.emplace_back(c, std::move(*nv));
              }
          auto it = producer.find(kc);
          if (it == producer.end()) {
            if (!off || ix.nodes(kc, ir::Op::Kernel).empty()) continue;
            if (const ir::Variant* p = off_program.kernel(kc, 0))
              if (auto nv = ir::substitute(g, k, slot, *p, ctx.max_body_nodes))
                todo.emplace_back(c, std::move(*nv));
            continue;
          }
          for (Id pn : it->second) {
            const ir::Variant p = variant_of(g, pn);
            if (p.spec->kind == ir::KernelKind::Gather) continue;
            if (auto nv = ir::substitute(g, k, slot, p, ctx.max_body_nodes)) {
              todo.emplace_back(c, std::move(*nv));
              continue;
            }
            // No kernel runs that: the consumer may still take the producer together with
            // one of the producer's own producers, a chain P2 -> P -> consumer where P
            // cannot hold P2 alone (the product of a softmax and V taking the softmax and
            // the scores it reads: an attention; ir::nest).
            for (std::size_t s2 = 0; s2 < p.kids.size(); ++s2) {
              auto it2 = producer.find(g.find(p.kids[s2]));
              if (it2 == producer.end()) continue;
              for (Id pn2 : it2->second) {
                const ir::Variant p2 = variant_of(g, pn2);
                if (p2.spec->kind == ir::KernelKind::Gather) continue;
                if (auto inner = ir::nest(g, p, s2, p2, ctx.max_body_nodes))
                  if (auto nv = ir::substitute(g, k, slot, *inner, ctx.max_body_nodes))
                    todo.emplace_back(c, std::move(*nv));
              }
            }
          }
        }
      }
    }
    fresh_from = g.num_node_ids();
    if (add_variants(g, todo, "absorb-producers", sweep) == 0 || out_of_budget) break;
  }
  return g.num_nodes() - before;
}

// Tile configurations of every generated GEMM, the target's own (register micro tiles on
// a CPU, thread-block tiles on a GPU): alternatives the cost model ranks by how well the
// tiles cover the output and how much each loaded value is reused.
std::size_t gemm_tiles(EGraph& g, const PassContext& ctx) {
  const auto& tiles = ctx.target.gemm_tiles;
  return add_kernel_twins(
      g, ir::KernelKind::Gemm,
      [&](const ir::KernelSpec& spec) {
        std::vector<std::shared_ptr<ir::KernelSpec>> out;
        for (const auto& t : tiles) {
          auto tiled = std::make_shared<ir::KernelSpec>(spec);
          tiled->launch.assign(t.begin(), t.end());
          out.push_back(std::move(tiled));
        }
        return out;
      },
      ctx.node_limit, ctx.first_node);
}

// A GEMM kernel whose products are each a matrix times a vector (one token: a decode
// step's projections) is also a row kernel, each output element one row's dot product:
//   kernel[gemm](slots) = kernel[reduction](slots), the same body.
// Fusion builds a consumer's body where its kernel is (absorb-producers along the
// program's edges): a decode step's down projection, extracted as a GEMM, absorbs SwiGLU
// as a GEMM prologue, and nothing offered the row kernel of that body, which the fusion
// policies build from the product's primitive spelling. The twin lets the extractor
// choose, as the tile twins do.
std::size_t gemm_as_rows(EGraph& g, const PassContext& ctx) {
  return add_kernel_twins(
      g, ir::KernelKind::Gemm,
      [](const ir::KernelSpec& spec) {
        std::vector<std::shared_ptr<ir::KernelSpec>> out;
        if (!spec.body || !ir::gemm_as_rows(*spec.body)) return out;
        out.push_back(std::make_shared<ir::KernelSpec>(spec));
        out.back()->kind = ir::KernelKind::Reduction;
        return out;
      },
      ctx.node_limit, ctx.first_node);
}

// The forms fusion exists for, on random small shapes (the checker's random programs
// cover the rest): attention (causal or not, grouped heads), RMSNorm into a linear's
// prologue, a SwiGLU feed-forward.
std::shared_ptr<detail::GraphImpl> fusion_example(std::mt19937_64& rng) {
  auto dim = [&] { return static_cast<int64_t>(1 + rng() % 4); };
  Graph g;
  const int64_t s = dim(), d = dim(), h = dim();
  switch (rng() % 4) {
    case 0: {
      const int64_t sk = s + static_cast<int64_t>(rng() % 3), kv = 1 + static_cast<int64_t>(rng() % 2);
      const DType dt = std::array<DType, 3>{DType::f32, DType::f16, DType::bf16}[rng() % 3];
      Tensor q = g.input("q", {kv * h, s, d}, dt), k = g.input("k", {kv, sk, d}, dt),
             v = g.input("v", {kv, sk, d + 1}, dt);
      auto rep = [&](const Tensor& t, int64_t w) {
        return reshape(expand(reshape(t, {kv, 1, sk, w}), {kv, h, sk, w}), {kv * h, sk, w});
      };
      g.output("y", scaled_dot_product_attention(q, rep(k, d), rep(v, d + 1), rng() % 2 == 0));
      break;
    }
    case 1:
      g.output("y", linear(rms_norm(g.input("x", {s, d}), g.param("w", {d})), g.param("m", {h, d})));
      break;
    case 2: {
      Tensor x = rms_norm(g.input("x", {s, d}), g.param("n", {d}));
      g.output("y", linear(silu(linear(x, g.param("g", {h, d}))) * linear(x, g.param("u", {h, d})),
                           g.param("o", {d, h})));
      break;
    }
    default: {
      // Sibling row products of one vector (a decode step's gate and up), combined by
      // their consumer (combine_siblings), with or without an activation between.
      Tensor x = expand(reshape(g.input("x", {d}), {1, d}), {h, d});
      Tensor a = sum(x * g.param("g", {h, d}), {1}), b = sum(x * g.param("u", {h, d}), {1});
      g.output("y", rng() % 2 ? silu(a) * b : a * b);
      break;
    }
  }
  return g.impl();
}

// absorb-producers' examples: fusion's, and half of the time SwiGLU over a decode step's
// gate and up products of one token (with or without the down product): the program the
// fusion policies make computes both products and SwiGLU in one row kernel, and
// absorb-producers computes SwiGLU off the slices of the merged gate|up product
// (OffProgram::computed_off_wider) -- which only such a program leads it to.
std::shared_ptr<detail::GraphImpl> producers_example(std::mt19937_64& rng) {
  if (rng() % 2) return fusion_example(rng);
  auto dim = [&] { return static_cast<int64_t>(1 + rng() % 4); };
  Graph g;
  const int64_t d = dim(), h = dim();
  Tensor x = g.input("x", {1, d});
  if (rng() % 2) x = rms_norm(x, g.param("n", {d}));
  Tensor y = silu(linear(x, g.param("g", {h, d}))) * linear(x, g.param("u", {h, d}));
  g.output("y", rng() % 2 ? linear(y, g.param("o", {d, h})) : y);
  return g.impl();
}

// The online-softmax rule. Fusion builds matmul, masked softmax, matmul as one kernel of
// kind AttentionTwoPass: its body as the math defines it (the max over every key first,
// then the sums), which no backend runs as one kernel. This rule states
//
//   kernel[two passes](slots) = kernel[Attention](slots)
//
// where an Attention node's value is the online-softmax recurrence over blocks of keys
// (ir/online_softmax.hpp: exact at fully masked blocks, masked rows, empty key axes,
// inf/NaN scores and values; otherwise it differs from the two passes by rounding only,
// as a reordered sum does). The rule checker evaluates the Attention node by that
// recurrence and compares it with the two-pass node. It is an engine rule: the runner
// applies it to every e-node of every class (the kernel phase of the search), and
// extraction chooses the streaming node because the two-pass one has no cost.
// Only f32 scores and products: the recurrence is stated in f32. Half q, k, v (the op
// widens them, and rounds the result) are that: the casts are the body's prologue and
// epilogue, the same on both sides of the rule, so it stays exact.
// `rounded`: the bodies whose weights are rounded to a half before the second product
// (the fast-math rule's) instead of the others (the exact rule's).
bool streamable(const ir::KernelSpec& spec, bool rounded) {
  if (spec.kind != ir::KernelKind::AttentionTwoPass) return false;
  const auto m = ir::match_attention(*spec.body);
  if (!m || (m->rounded >= 0) != rounded || !ir::attention_output_contiguous(*spec.body, *m)) return false;
  const auto& nodes = spec.body->nodes;
  return nodes[m->score].dtype == DType::f32 && nodes[nodes[m->out_reduce].inputs[0]].dtype == DType::f32;
}

void stream_attention(ir::EGraph& g, const egraph::Match& m, bool rounded) {
  // The class's kernel nodes are read from the index, valid only on a rebuilt e-graph;
  // an earlier application merged, so rebuild (cheap: one pending merge; this happens
  // once per attention kernel, not per match).
  if (!g.is_clean()) g.rebuild();
  const Id cls = g.find(m.root());
  const auto& ix = g.index();
  std::vector<ir::Variant> twins;
  for (Id nd : ix.nodes(cls, ir::Op::Kernel)) {
    const auto& spec = g.analysis().attrs().get(g.node(nd).payload).kernel;
    if (!spec || !streamable(*spec, rounded)) continue;
    auto twin = std::make_shared<ir::KernelSpec>(*spec);
    twin->kind = ir::KernelKind::Attention;
    twin->finalize();
    auto kids = g.node(nd).kids;
    twins.push_back(ir::Variant{std::move(twin), std::vector<Id>(kids.begin(), kids.end())});
  }
  for (const ir::Variant& v : twins) g.merge(cls, ir::add_kernel(g, v.spec, v.kids));
}

// Attention on random small shapes for the online-softmax rule: causal or not (fully
// masked key blocks), grouped heads, sometimes a batch axis (rank 4), empty axes, and
// f16/bf16 q, k, v as real models have them (the op widens them and rounds the result:
// the rule's body then holds those casts as prologue and epilogue, and the checker's
// half leaves reach their own edges -- the f16 overflow threshold, half subnormals).
std::shared_ptr<detail::GraphImpl> attention_example(std::mt19937_64& rng) {
  auto dim = [&](int lo) { return static_cast<int64_t>(rng() % 10 == 0 ? lo : 1 + rng() % 4); };
  Graph g;
  const int64_t s = dim(0), d = dim(1), h = dim(1), sk = s + static_cast<int64_t>(rng() % 4);
  const int64_t kv = 1 + static_cast<int64_t>(rng() % 2);
  const bool batch = rng() % 3 == 0, causal = rng() % 3 != 0;
  const DType dt = std::array<DType, 4>{DType::f32, DType::f32, DType::f16, DType::bf16}[rng() % 4];
  auto shape = [&](std::vector<int64_t> sh) {
    if (batch) sh.insert(sh.begin(), 2);
    return std::vector<Dim>(sh.begin(), sh.end());
  };
  Tensor q = g.input("q", shape({kv * h, s, d}), dt), k = g.input("k", shape({kv, sk, d}), dt),
         v = g.input("v", shape({kv, sk, d + 1}), dt);
  auto rep = [&](const Tensor& t, int64_t w) {
    if (batch) return reshape(expand(reshape(t, {2, kv, 1, sk, w}), {2, kv, h, sk, w}), {2, kv * h, sk, w});
    return reshape(expand(reshape(t, {kv, 1, sk, w}), {kv, h, sk, w}), {kv * h, sk, w});
  };
  g.output("y", scaled_dot_product_attention(q, rep(k, d), rep(v, d + 1), causal));
  return g.impl();
}

// Attention written by hand on f16/bf16 tensors: matmul, softmax and matmul each widen
// their operands and round their result, so the weights P reach the second product
// rounded to the half (P' = cast_f32(cast_half(P))). A streaming kernel never holds the
// final P_j, so it cannot round them: it computes the product with the unrounded
// weights, which differs from the body by that rounding (relative 2^-11 for f16, 2^-8
// for bf16, per weight). Not exact, so the rule for these bodies is fast-math.
std::shared_ptr<detail::GraphImpl> rounded_attention_example(std::mt19937_64& rng) {
  auto dim = [&] { return static_cast<int64_t>(1 + rng() % 4); };
  Graph g;
  const int64_t s = dim(), d = dim(), h = dim(), sk = s + static_cast<int64_t>(rng() % 3);
  const DType dt = rng() % 2 ? DType::f16 : DType::bf16;
  Tensor q = g.input("q", {h, s, d}, dt), k = g.input("k", {h, sk, d}, dt), v = g.input("v", {h, sk, d + 1}, dt);
  Tensor sc = matmul(q, transpose(k, 1, 2)) * static_cast<float>(1.0 / std::sqrt(static_cast<double>(d)));
  if (rng() % 2) sc = where(tril_mask(Dim(s), Dim(sk)), sc, -INFINITY);
  g.output("y", matmul(softmax(sc, -1), v));
  return g.impl();
}

RuleInfo online_softmax_rule(bool rounded) {
  RuleInfo r;
  r.name = rounded ? "online-softmax-rounded-weights" : "online-softmax";
  r.doc = rounded ? "kernel[attention, two passes, weights rounded to f16/bf16 before the second product](slots) ~ "
                    "kernel[attention, online softmax, weights unrounded](slots)"
                  : "kernel[attention, two passes: max, then sums](slots) = kernel[attention, online softmax over key "
                    "blocks, fully masked blocks skipped](slots)";
  r.fast_math = rounded;
  // Any class (a bare variable): the applier looks at the class's kernel nodes.
  egraph::Pattern<ir::TensorLang> any;
  any.nodes.push_back({});
  any.nodes.back().var = 0;
  any.var_names[0] = "?k";
  r.rule = std::make_shared<const TensorRule>(
      TensorRule(r.name, {any}, {}, [rounded](ir::EGraph& g, const egraph::Match& m) { stream_attention(g, m, rounded); }));
  r.example = rounded ? rounded_attention_example : attention_example;
  return r;
}

}  // namespace

RuleSet fusion_rules() {
  return {"fusion",
          {
              [] {
                RuleInfo r = pass_rule("fuse-producers", fuse_producers, Exact,
                                       "kernel(.., slot P, ..) = kernel(.., body of P's kernel, ..)");
                r.example = fusion_example;
                return r;
              }(),
              [] {
                RuleInfo r =
                    pass_rule("absorb-views", absorb_views, Exact,
                              "kernel(.., slot P, ..) = kernel(.., body of P's kernel, ..) for every kernel "
                              "node of P's class without arithmetic (views, casts), every pair of e-nodes");
                r.example = views_example;
                r.guided = true;
                return r;
              }(),
              [] {
                RuleInfo r =
                    pass_rule("absorb-producers", absorb_producers, Exact,
                              "kernel(.., slot P, ..) = kernel(.., body of P's kernel, ..) along the "
                              "extracted program's edges and into the wider products its classes are "
                              "slices of, up to three producers per kernel");
                r.example = producers_example;
                r.guided = true;
                return r;
              }(),
              pass_rule("gemm-tile-configs", gemm_tiles, Exact,
                        "gemm kernel = the same gemm with each of the target's tile configurations"),
              pass_rule("gemm-as-rows", gemm_as_rows, Exact,
                        "gemm kernel of matrix-vector products = the same body as a row-reduction kernel"),
              online_softmax_rule(false),
              online_softmax_rule(true),
          }};
}

}  // namespace luminal::rules
