// Extraction: choosing one node per e-class to build a concrete term.
//
//  - GreedyExtractor: bottom-up tree cost with a user cost function
//    `double cost(NodeView<L> n, std::span<const double> kid_costs)`. It runs Knuth's
//    generalization of Dijkstra: a node is costed once all its child classes are final,
//    and a class becomes final with its cheapest node. The result is optimal for costs
//    that are monotone and at least each child's cost (AST size, depth, sums of positive
//    node costs), and acyclic for every cost function, by construction.
//  - DagExtractor: a DAG cost that counts a shared class once,
//    `double node_cost(NodeView<L> n)` summed over the distinct classes used. It starts
//    from the greedy solution and improves it by local search: switch one class's node
//    while that lowers the DAG cost and keeps it acyclic (a switch to a node that reads
//    classes the solution does not compute also re-chooses those onto nodes reading only
//    what it computes: DagOptions::fresh_children); then, per class X, move every
//    used class that can read X onto X at once (a shared producer, such as one merged
//    product for three projections, that no single switch pays for), or every class
//    reading X off it at once (a shared value each reader computes more cheaply). When few classes
//    are reachable it finds the exact optimum by branch and bound. Optionally
//    (DagOptions::dag_greedy) a second start: the same bottom-up order with each node
//    costed by the DAG cost of the classes below it (a set union, each class once)
//    instead of the tree cost; the better of the two improved solutions is kept.
// A cost of +infinity means "never extract this node".
#pragma once

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <functional>
#include <iterator>
#include <limits>
#include <queue>
#include <span>
#include <utility>
#include <vector>

#include "luminal/egraph/egraph.hpp"
#include "luminal/error.hpp"

namespace luminal::egraph {

inline constexpr double kInfiniteCost = std::numeric_limits<double>::infinity();

/// An extracted term as a DAG: nodes in topological order (children before parents),
/// children as indices into the term. Shared sub-terms appear once.
template <Language L>
struct Term {
  std::vector<typename L::Op> ops;
  std::vector<typename L::Payload> payloads;
  std::vector<std::uint32_t> kid_off{0};
  std::vector<std::uint32_t> kids;
  std::vector<std::uint32_t> roots;  ///< term index of each requested root

  /// Number of nodes.
  std::size_t size() const noexcept { return ops.size(); }
  /// Node i (its `kids` are term indices, all below i).
  NodeView<L> node(std::size_t i) const noexcept {
    return NodeView<L>{ops[i], payloads[i],
                       std::span<const Id>(kids.data() + kid_off[i], kid_off[i + 1] - kid_off[i])};
  }
  /// Number of nodes of the tree under term node i (shared sub-terms counted each time).
  double tree_size(std::uint32_t i) const {
    double s = 1;
    for (Id k : node(i).kids) s += tree_size(k);
    return s;
  }
};

/// AST size: every node costs 1 plus its children.
struct AstSize {
  template <class N>
  double operator()(const N&, std::span<const double> kid_costs) const noexcept {
    double s = 1;
    for (double k : kid_costs) s += k;
    return s;
  }
};

namespace detail {
// Builds the term of a choice (one node per class) from roots; children first.
template <Language L, class A>
Term<L> build_term(const EGraph<L, A>& g, const std::vector<Id>& choice, std::span<const Id> roots) {
  Term<L> t;
  std::vector<std::uint32_t> pos(choice.size(), 0xFFFFFFFFu);
  // Iterative post-order DFS over classes.
  std::vector<std::pair<Id, std::uint32_t>> stack;
  for (Id r0 : roots) {
    Id r = g.find(r0);
    if (choice[r] == kNoId)
      throw Error("[egraph] extract: class " + std::to_string(r) + " has no finite-cost term");
    stack.push_back({r, 0});
    while (!stack.empty()) {
      auto& [c, k] = stack.back();
      if (pos[c] != 0xFFFFFFFFu) {
        stack.pop_back();
        continue;
      }
      NodeView<L> n = g.node(choice[c]);
      if (k < n.kids.size()) {
        Id kc = g.find(n.kids[k++]);
        if (pos[kc] == 0xFFFFFFFFu) stack.push_back({kc, 0});
        continue;
      }
      pos[c] = static_cast<std::uint32_t>(t.ops.size());
      t.ops.push_back(n.op);
      t.payloads.push_back(n.payload);
      for (Id kid : n.kids) t.kids.push_back(pos[g.find(kid)]);
      t.kid_off.push_back(static_cast<std::uint32_t>(t.kids.size()));
      stack.pop_back();
    }
    t.roots.push_back(pos[r]);
  }
  return t;
}
/// The nodes that use each class, as a CSR (`parents[off[c] .. off[c + 1])` for class c),
/// and each node's number of kid slots in `remaining`: what bottom-up extraction walks.
struct ParentIndex {
  std::vector<std::uint32_t> off, remaining;
  std::vector<Id> parents;
};
template <Language L, class A>
ParentIndex parent_index(const EGraph<L, A>& g, const ClassIndex<L>& ix) {
  const std::size_t n = g.num_node_ids();
  ParentIndex r;
  r.off.assign(n + 1, 0);
  r.remaining.assign(n, 0);
  for (Id nd : ix.all_nodes()) {
    NodeView<L> v = g.node(nd);
    r.remaining[nd] = static_cast<std::uint32_t>(v.kids.size());
    for (Id k : v.kids) ++r.off[g.find(k) + 1];
  }
  for (std::size_t i = 0; i < n; ++i) r.off[i + 1] += r.off[i];
  r.parents.resize(r.off[n]);
  std::vector<std::uint32_t> fill(r.off.begin(), r.off.end() - 1);
  for (Id nd : ix.all_nodes())
    for (Id k : g.node(nd).kids) r.parents[fill[g.find(k)]++] = nd;
  return r;
}

}  // namespace detail

/// Greedy bottom-up extraction (see the file comment). Needs a rebuilt e-graph.
template <Language L, class A, class CostFn>
class GreedyExtractor {
 public:
  /// Costs every class of `g` (rebuilt first if needed).
  GreedyExtractor(EGraph<L, A>& g, CostFn cost) : g_(g), cost_fn_(std::move(cost)) {
    if (!g.is_clean()) g.rebuild();
    run();
  }

  /// The best tree cost of class `cls` (+infinity when it has no finite term).
  double cost(Id cls) const noexcept { return cost_[g_.find(cls)]; }
  /// The chosen node of class `cls` (kNoId when none).
  Id best_node(Id cls) const noexcept { return best_[g_.find(cls)]; }
  /// One chosen node per class id (kNoId for non-canonical or uncostable classes).
  const std::vector<Id>& choices() const noexcept { return best_; }

  /// The best terms of `roots`, as one DAG. Throws luminal::Error if a root has no
  /// finite-cost term.
  Term<L> extract(std::span<const Id> roots) const { return detail::build_term(g_, best_, roots); }
  /// The best term of one class.
  Term<L> extract(Id root) const { return extract(std::span<const Id>(&root, 1)); }

 private:
  void run() {
    const ClassIndex<L>& ix = g_.index();
    const std::size_t n = g_.num_node_ids();
    cost_.assign(n, kInfiniteCost);
    best_.assign(n, kNoId);
    std::vector<std::uint8_t> done(n, 0);
    detail::ParentIndex pi = detail::parent_index(g_, ix);
    const std::vector<std::uint32_t>& poff = pi.off;
    const std::vector<Id>& parents = pi.parents;
    std::vector<std::uint32_t>& remaining = pi.remaining;
    using Item = std::pair<double, Id>;
    std::priority_queue<Item, std::vector<Item>, std::greater<Item>> heap;
    std::vector<double> kc;
    auto node_cost = [&](Id nd) {
      NodeView<L> v = g_.node(nd);
      kc.resize(v.kids.size());
      for (std::size_t i = 0; i < v.kids.size(); ++i) kc[i] = cost_[v.kids[i]];
      return static_cast<double>(cost_fn_(v, std::span<const double>(kc)));
    };
    for (Id nd : ix.all_nodes())
      if (remaining[nd] == 0) {
        double c = node_cost(nd);
        if (c < kInfiniteCost) heap.push({c, nd});
      }
    while (!heap.empty()) {
      auto [c, nd] = heap.top();
      heap.pop();
      Id cls = g_.class_of_node(nd);
      if (done[cls]) continue;
      done[cls] = 1;
      cost_[cls] = c;
      best_[cls] = nd;
      for (std::uint32_t i = poff[cls]; i < poff[cls + 1]; ++i) {
        Id p = parents[i];
        if (--remaining[p] == 0 && !done[g_.class_of_node(p)]) {
          double pc = node_cost(p);
          if (pc < kInfiniteCost) heap.push({pc, p});
        }
      }
    }
  }

  EGraph<L, A>& g_;
  CostFn cost_fn_;
  std::vector<double> cost_;
  std::vector<Id> best_;
};

/// Options of the DAG extractor.
struct DagOptions {
  /// Exact branch and bound when at most this many classes are reachable from the roots.
  std::size_t exact_class_limit = 40;
  /// Give up the exact search after this many search steps (the result is then the best
  /// found, `optimal` false).
  std::size_t exact_step_limit = 1'000'000;
  /// Rounds of local improvement of the heuristic.
  std::size_t improve_rounds = 8;
  /// Work budget of the local improvement, in class visits (each candidate switch costs
  /// one DAG-cost evaluation, proportional to the solution's size).
  std::size_t improve_budget = 20'000'000;
  /// Also try moving every used class that can read one class X onto its cheapest node
  /// reading X (then onto the one reading the fewest classes the solution does not
  /// compute), at once, for each X: sharing a producer that no single switch makes
  /// worthwhile (three projections' consumers moved onto one merged product, each switch
  /// alone paying for the product while the old ones stay); and the opposite, every
  /// class reading a computed X moved onto its cheapest node that does not (a shared
  /// value cheaper computed by each reader than by a kernel of its own).
  bool shared_moves = true;
  /// A single switch that reads classes the solution does not compute also re-chooses
  /// each of them: its cheapest node reading only classes the solution computes (the
  /// greedy start chose them by tree cost, which counts a shared producer in full).
  bool fresh_children = true;
  /// Also start from a greedy solution costed by DAG cost below each node (see the file
  /// comment), when the e-graph has at most dag_greedy_class_limit classes (each class
  /// holds the set of classes below its choice). Tree costs count a value once per use,
  /// so in a deep program they mostly measure how often a form reads the shared values
  /// beneath it: a sharded program's greedy tree solution gathers where one all_reduce
  /// would do, and single-class switches cannot undo a whole chain of such choices.
  bool dag_greedy = false;
  std::size_t dag_greedy_class_limit = 20000;
  /// Wall-clock deadline of the local improvement and the exact search: past it the best
  /// solution found so far is returned (the greedy one at worst).
  std::chrono::steady_clock::time_point deadline = std::chrono::steady_clock::time_point::max();
};

/// DAG-aware extraction (see the file comment). Needs a rebuilt e-graph.
template <Language L, class A, class NodeCostFn>
class DagExtractor {
 public:
  /// The result: the term, its DAG cost, the chosen node per class, whether it is proven
  /// optimal.
  struct Result {
    Term<L> term;
    double cost = kInfiniteCost;
    std::vector<Id> choice;
    bool optimal = false;
    /// DagOptions::deadline cut the improvement or the exact search short: the choice is
    /// sound, but another machine (or a longer deadline) may find a cheaper one.
    bool timed_out = false;
  };

  DagExtractor(EGraph<L, A>& g, NodeCostFn node_cost, DagOptions opt = {})
      : g_(g), cost_fn_(std::move(node_cost)), opt_(opt) {
    if (!g.is_clean()) g.rebuild();
  }

  /// Extracts the roots jointly, sharing common classes. `seed`, when given, is a choice
  /// per class from an earlier extraction of this e-graph (before it grew): it is improved
  /// as the greedy solution is, and the result is never dearer than it. (The e-graph only
  /// grew, so its optimum did not get dearer; a heuristic restarted from scratch can.)
  Result extract(std::span<const Id> roots_in, std::span<const Id> seed = {}) {
    std::vector<Id> roots;
    for (Id r : roots_in) roots.push_back(g_.find(r));
    const ClassIndex<L>& ix = g_.index();
    const std::size_t n = g_.num_node_ids();
    node_cost_.assign(n, kInfiniteCost);
    for (Id nd : ix.all_nodes()) node_cost_[nd] = static_cast<double>(cost_fn_(g_.node(nd)));
    // 1. Greedy tree solution: node cost plus the children's.
    auto tree = [&](const NodeView<L>& v, std::span<const double> kc) {
      double s = cost_fn_(v);
      for (double k : kc) s += k;
      return s;
    };
    GreedyExtractor<L, A, decltype(tree)> greedy(g_, tree);
    Result res;
    res.choice = greedy.choices();
    for (Id r : roots)
      if (res.choice[r] == kNoId)
        throw Error("[egraph] extract: class " + std::to_string(r) + " has no finite-cost term");
    res.cost = dag_cost(res.choice, roots);
    // 2. Local improvement: single switches, then whole groups of consumers moved onto
    // one producer at a time, single switches again after each group that helps.
    improve(res, roots, ix);
    if (opt_.shared_moves) improve_shared(res, roots, ix);
    if (opt_.dag_greedy && g_.num_classes() <= opt_.dag_greedy_class_limit) {
      Result alt;
      alt.choice = dag_greedy(ix);
      alt.cost = dag_cost(alt.choice, roots);
      if (alt.cost < kInfiniteCost) {
        improve(alt, roots, ix);
        if (alt.cost < res.cost) res = std::move(alt);
      }
    }
    if (!seed.empty()) {
      Result alt;
      alt.choice = res.choice;
      for (std::size_t c = 0; c < seed.size() && c < alt.choice.size(); ++c)
        if (seed[c] != kNoId && seed[c] < n && g_.is_live(seed[c]) && g_.find(seed[c]) == c)
          alt.choice[c] = seed[c];
      alt.cost = dag_cost(alt.choice, roots);
      if (alt.cost < kInfiniteCost) {
        improve(alt, roots, ix);
        if (opt_.shared_moves) improve_shared(alt, roots, ix);
        if (alt.cost < res.cost) res = std::move(alt);
      }
    }
    // 3. Exact search on small problems.
    std::vector<Id> reach = reachable_all(roots, ix);
    if (reach.size() <= opt_.exact_class_limit) exact(res, roots, ix);
    res.term = detail::build_term(g_, res.choice, roots);
    res.timed_out = timed_out_;
    return res;
  }

  /// DAG cost of a choice (+infinity if a root is missing or it is cyclic).
  double dag_cost(const std::vector<Id>& choice, const std::vector<Id>& roots) const {
    std::vector<std::uint8_t> color(choice.size(), 0);  // 0 new, 1 on stack, 2 done
    double total = 0;
    std::vector<std::pair<Id, std::uint32_t>> st;
    for (Id r : roots) {
      if (color[r] == 2) continue;
      st.push_back({r, 0});
      color[r] = 1;
      while (!st.empty()) {
        auto& [c, k] = st.back();
        if (choice[c] == kNoId) return kInfiniteCost;
        NodeView<L> v = g_.node(choice[c]);
        if (k < v.kids.size()) {
          Id kc = g_.find(v.kids[k++]);
          if (color[kc] == 1) return kInfiniteCost;  // cycle
          if (color[kc] == 0) {
            color[kc] = 1;
            st.push_back({kc, 0});
          }
          continue;
        }
        total += node_cost_[choice[c]];
        color[c] = 2;
        st.pop_back();
      }
    }
    return total;
  }

 private:
  std::vector<Id> reachable_all(const std::vector<Id>& roots, const ClassIndex<L>& ix) const {
    std::vector<std::uint8_t> seen(g_.num_node_ids(), 0);
    std::vector<Id> out, st(roots.begin(), roots.end());
    while (!st.empty()) {
      Id c = st.back();
      st.pop_back();
      if (seen[c]) continue;
      seen[c] = 1;
      out.push_back(c);
      if (out.size() > opt_.exact_class_limit) return out;
      for (Id nd : ix.nodes(c))
        if (node_cost_[nd] < kInfiniteCost)
          for (Id k : g_.node(nd).kids) st.push_back(k);
    }
    return out;
  }

  std::vector<Id> used_classes(const std::vector<Id>& choice, const std::vector<Id>& roots) const {
    std::vector<std::uint8_t> seen(choice.size(), 0);
    std::vector<Id> out, st(roots.begin(), roots.end());
    while (!st.empty()) {
      Id c = st.back();
      st.pop_back();
      if (seen[c]) continue;
      seen[c] = 1;
      out.push_back(c);
      for (Id k : g_.node(choice[c]).kids) st.push_back(g_.find(k));
    }
    return out;
  }

  // Bottom-up like GreedyExtractor, but a node costs the DAG cost of its class's choice
  // set: its own cost plus each distinct class below it once (sorted class-id sets,
  // merged). A node whose kids' sets hold its own class would close a cycle: skipped.
  std::vector<Id> dag_greedy(const ClassIndex<L>& ix) const {
    const std::size_t n = g_.num_node_ids();
    std::vector<Id> best(n, kNoId);
    std::vector<double> cost(n, kInfiniteCost);
    std::vector<std::vector<Id>> below(n);  // classes below a final class's choice
    std::vector<std::uint8_t> done(n, 0);
    detail::ParentIndex pi = detail::parent_index(g_, ix);
    const std::vector<std::uint32_t>& poff = pi.off;
    const std::vector<Id>& parents = pi.parents;
    std::vector<std::uint32_t>& remaining = pi.remaining;
    std::vector<Id> set, tmp;
    // The set below node nd and its DAG cost (+infinity for a cycle or a costless node).
    auto node_set = [&](Id nd, std::vector<Id>& out) {
      out.clear();
      if (node_cost_[nd] == kInfiniteCost) return kInfiniteCost;
      const Id self = g_.class_of_node(nd);
      for (Id k : g_.node(nd).kids) {
        const Id kc = g_.find(k);
        tmp.clear();
        std::set_union(out.begin(), out.end(), below[kc].begin(), below[kc].end(), std::back_inserter(tmp));
        out.swap(tmp);
        auto at = std::lower_bound(out.begin(), out.end(), kc);
        if (at == out.end() || *at != kc) out.insert(at, kc);
      }
      if (std::binary_search(out.begin(), out.end(), self)) return kInfiniteCost;
      double c = node_cost_[nd];
      for (Id k : out) c += node_cost_[best[k]];
      return c;
    };
    using Item = std::pair<double, Id>;
    std::priority_queue<Item, std::vector<Item>, std::greater<Item>> heap;
    for (Id nd : ix.all_nodes())
      if (remaining[nd] == 0) {
        const double c = node_set(nd, set);
        if (c < kInfiniteCost) heap.push({c, nd});
      }
    while (!heap.empty()) {
      auto [c, nd] = heap.top();
      heap.pop();
      const Id cls = g_.class_of_node(nd);
      if (done[cls]) continue;
      done[cls] = 1;
      cost[cls] = c;
      best[cls] = nd;
      node_set(nd, below[cls]);
      for (std::uint32_t i = poff[cls]; i < poff[cls + 1]; ++i) {
        const Id p = parents[i];
        if (--remaining[p] == 0 && !done[g_.class_of_node(p)]) {
          const double pc = node_set(p, set);
          if (pc < kInfiniteCost) heap.push({pc, p});
        }
      }
    }
    return best;
  }

  // True once the deadline has passed; remembers it, so that extract() can say so.
  bool past_deadline() {
    if (opt_.deadline != std::chrono::steady_clock::time_point::max() &&
        std::chrono::steady_clock::now() >= opt_.deadline)
      timed_out_ = true;
    return timed_out_;
  }

  // Single switches: class c to another node. A switch that reads classes the program
  // does not compute also re-chooses each of them: its cheapest node that reads only
  // classes the program computes (an attention reading a RoPE'd K the program does not
  // store yet, whose cheapest node reads the merged Q|K|V product the program does
  // compute, not the separate K projection the greedy start chose by tree cost).
  void improve(Result& res, const std::vector<Id>& roots, const ClassIndex<L>& ix) {
    std::size_t spent = 0, evals = 0;
    std::vector<std::uint8_t> in_use;
    std::vector<std::pair<Id, Id>> fresh;  // (class newly read, its choice before)
    for (std::size_t round = 0; round < opt_.improve_rounds; ++round) {
      bool better = false;
      const std::vector<Id> used = used_classes(res.choice, roots);
      in_use.assign(res.choice.size(), 0);
      for (Id c : used) in_use[c] = 1;
      for (Id c : used) {
        Id keep = res.choice[c];
        for (Id nd : ix.nodes(c)) {
          if (nd == keep || node_cost_[nd] == kInfiniteCost) continue;
          spent += used.size();
          if (spent > opt_.improve_budget) return;
          if ((evals++ & 63) == 0 && past_deadline()) return;  // the first, then every 64th
          bool ok = true;
          for (Id k : g_.node(nd).kids) ok = ok && res.choice[k] != kNoId;
          if (!ok) continue;
          res.choice[c] = nd;
          double cst = dag_cost(res.choice, roots);
          fresh.clear();
          for (Id k0 : g_.node(nd).kids) {
            if (!opt_.fresh_children) break;
            const Id k = g_.find(k0);
            if (in_use[k]) continue;
            Id pick = kNoId;
            for (Id m : ix.nodes(k)) {
              if (node_cost_[m] == kInfiniteCost || (pick != kNoId && node_cost_[m] >= node_cost_[pick]))
                continue;
              bool reads_used = true;
              for (Id kk : g_.node(m).kids)
                reads_used = reads_used && in_use[g_.find(kk)] && g_.find(kk) != c;
              if (reads_used) pick = m;
            }
            if (pick != kNoId && pick != res.choice[k]) {
              fresh.push_back({k, res.choice[k]});
              res.choice[k] = pick;
            }
          }
          if (!fresh.empty()) {
            spent += used.size();
            const double with_fresh = dag_cost(res.choice, roots);
            if (with_fresh < cst) {
              cst = with_fresh;
            } else {
              for (const auto& [k, before] : fresh) res.choice[k] = before;
              fresh.clear();
            }
          }
          if (cst < res.cost) {
            res.cost = cst;
            keep = nd;
            better = true;
            for (const auto& [k, before] : fresh) in_use[k] = 1;
          } else {
            for (const auto& [k, before] : fresh) res.choice[k] = before;
          }
          res.choice[c] = keep;
        }
      }
      if (!better) break;
    }
  }

  // For each class X, the used classes that have a node reading X switch to their
  // cheapest such node (by its own cost) together, X keeping its current choice; kept
  // when the DAG cost drops (then single switches again). Once no such move pays, the
  // same with each class's node reading the fewest classes the solution does not
  // compute (then the cheapest), and after one of those pays, by own cost again.
  // Bounded by improve_budget.
  //
  // By own cost alone a move took nodes needing producers nothing computes (a RoPE table,
  // a cast), whose kernels outweighed the sharing: the GPU decode step's Q, K and V
  // stayed three products. Tried first instead, the second order's moves led the CPU
  // block at S = 16 (without the fusion policies) off the merged product the first finds;
  // as a fallback they only go on from where the first stops.
  void improve_shared(Result& res, const std::vector<Id>& roots, const ClassIndex<L>& ix) {
    const detail::ParentIndex pi = detail::parent_index(g_, ix);
    std::size_t spent = 0, evals = 0;
    bool fewest_uncomputed = false;
    for (std::size_t round = 0; round < 2 * opt_.improve_rounds; ++round) {
      bool better = false;
      std::vector<std::uint8_t> used(res.choice.size(), 0);
      std::size_t in_use = 0;
      auto mark_used = [&] {
        std::fill(used.begin(), used.end(), 0);
        const std::vector<Id> u = used_classes(res.choice, roots);
        for (Id c : u) used[c] = 1;
        in_use = u.size();
      };
      mark_used();
      // Classes node `nd` reads (x aside) that the solution does not compute.
      auto uncomputed = [&](Id nd, Id x) {
        std::size_t n = 0;
        for (Id k : g_.node(nd).kids) n += g_.find(k) != x && !used[g_.find(k)];
        return n;
      };
      // Distinct classes node `nd` reads (x aside) whose chosen node costs something.
      auto computed_reads = [&](Id nd, Id x) {
        std::size_t n = 0;
        const auto kids = g_.node(nd).kids;
        for (std::size_t i = 0; i < kids.size(); ++i) {
          const Id k = g_.find(kids[i]);
          bool repeat = false;
          for (std::size_t j = 0; j < i; ++j) repeat = repeat || g_.find(kids[j]) == k;
          n += !repeat && k != x && res.choice[k] != kNoId && node_cost_[res.choice[k]] > 0;
        }
        return n;
      };
      std::vector<std::pair<Id, Id>> moves;  // (class, its node before the move)
      // The moves made kept when the DAG cost drops (then single switches again), undone
      // otherwise.
      auto keep_moves = [&] {
        spent += in_use;
        const double cst = dag_cost(res.choice, roots);
        if (cst < res.cost * (1 - 1e-12)) {
          res.cost = cst;
          improve(res, roots, ix);
          better = true;
          mark_used();
          return true;
        }
        for (const auto& [c, before] : moves) res.choice[c] = before;
        return false;
      };
      for (Id x : ix.classes()) {
        if (res.choice[x] == kNoId || node_cost_[res.choice[x]] == kInfiniteCost) continue;
        moves.clear();
        for (std::uint32_t j = pi.off[x]; j < pi.off[x + 1]; ++j) {
          const Id nd = pi.parents[j];
          const Id c = g_.find(nd);
          if (!used[c] || c == x || nd == res.choice[c] || node_cost_[nd] == kInfiniteCost) continue;
          bool ok = true;
          for (Id k : g_.node(nd).kids) ok = ok && res.choice[g_.find(k)] != kNoId;
          if (!ok) continue;
          // A class that reads x already stays; else its best node reading x (the
          // parents list c's nodes in any order).
          const Id cur = res.choice[c];
          bool reads_x = false;
          for (Id k : g_.node(cur).kids) reads_x = reads_x || g_.find(k) == x;
          bool moved_before = false;
          for (const auto& mv : moves) moved_before = moved_before || mv.first == c;
          bool nd_better = node_cost_[nd] < node_cost_[cur];
          // (of two as cheap, the one reading fewer other computed classes: the attention
          // reading Q, K and V all off the merged product x, not Q still off its own
          // kernel, which would keep that kernel and the move would not pay)
          if (moved_before && node_cost_[nd] == node_cost_[cur])
            nd_better = computed_reads(nd, x) < computed_reads(cur, x);
          if (fewest_uncomputed && moved_before) {
            const std::size_t fn = uncomputed(nd, x), fc = uncomputed(cur, x);
            if (fn != fc) nd_better = fn < fc;
          }
          if (reads_x && (!moved_before || !nd_better)) continue;
          if (!moved_before) moves.push_back({c, cur});
          res.choice[c] = nd;
        }
        if (moves.empty()) continue;
        keep_moves();
        if (spent > opt_.improve_budget) return;
        if ((evals++ & 15) == 0 && past_deadline()) return;
      }
      // The opposite move: every used class reading x moved at once onto its node that does
      // not -- the one reading the fewest classes the solution does not compute, then the
      // cheapest -- so nothing computes x: a shared value whose own kernel costs more than
      // each reader computing it (a RoPE table read by the K row's kernel and the
      // attention), which no single switch undoes while the other reader keeps x computed.
      std::vector<std::uint8_t> is_root(res.choice.size(), 0);
      for (Id r : roots) is_root[g_.find(r)] = 1;
      for (Id x : ix.classes()) {
        if (!used[x] || is_root[x]) continue;
        moves.clear();
        bool all = true;
        for (std::uint32_t j = pi.off[x]; j < pi.off[x + 1] && all; ++j) {
          const Id nd = pi.parents[j];
          const Id c = g_.find(nd);
          if (!used[c] || c == x || nd != res.choice[c]) continue;
          bool moved_before = false;
          for (const auto& mv : moves) moved_before = moved_before || mv.first == c;
          if (moved_before) continue;  // (x twice among its kids)
          Id best = kNoId;
          std::size_t best_uncomputed = 0;
          for (Id alt : ix.nodes(c)) {
            if (node_cost_[alt] == kInfiniteCost) continue;
            bool ok = true;
            // (a node reading its own class closes a cycle)
            for (Id k : g_.node(alt).kids)
              ok = ok && g_.find(k) != x && g_.find(k) != c && res.choice[g_.find(k)] != kNoId;
            if (!ok) continue;
            const std::size_t un = uncomputed(alt, x);
            if (best == kNoId || un < best_uncomputed ||
                (un == best_uncomputed && node_cost_[alt] < node_cost_[best])) {
              best = alt;
              best_uncomputed = un;
            }
          }
          if (best == kNoId) {
            all = false;
            break;
          }
          moves.push_back({c, nd});
          res.choice[c] = best;
        }
        if (all && !moves.empty()) {
          if (keep_moves()) continue;
        } else {
          for (const auto& [c, before] : moves) res.choice[c] = before;
        }
        if (spent > opt_.improve_budget) return;
        if ((evals++ & 15) == 0 && past_deadline()) return;
      }
      if (better) {
        fewest_uncomputed = false;
      } else if (!fewest_uncomputed) {
        fewest_uncomputed = true;
      } else {
        break;
      }
    }
  }

  // Branch and bound over classes in demand order; a class is assigned when first needed.
  void exact(Result& res, const std::vector<Id>& roots, const ClassIndex<L>& ix) {
    const std::size_t n = g_.num_node_ids();
    std::vector<Id> choice(n, kNoId);
    std::vector<std::uint32_t> need(n, 0);  // how many assigned nodes (or roots) need the class
    std::vector<Id> agenda;                 // classes needed, in order of need
    for (Id r : roots)
      if (need[r]++ == 0) agenda.push_back(r);
    std::size_t steps = 0;
    bool complete = true;
    std::vector<Id> best = res.choice;
    double best_cost = res.cost;
    // Does class `from` reach class `target` through assigned choices?
    std::vector<std::uint32_t> mark(n, 0);
    std::uint32_t stamp = 0;
    auto reaches = [&](Id from, Id target) {
      ++stamp;
      std::vector<Id> st{from};
      while (!st.empty()) {
        Id c = st.back();
        st.pop_back();
        if (c == target) return true;
        if (mark[c] == stamp || choice[c] == kNoId) continue;
        mark[c] = stamp;
        for (Id k : g_.node(choice[c]).kids) st.push_back(k);
      }
      return false;
    };
    std::function<void(std::size_t, double)> rec = [&](std::size_t pos, double cost) {
      if (++steps > opt_.exact_step_limit || ((steps & 1023) == 1 && past_deadline())) {
        complete = false;
        return;
      }
      if (cost >= best_cost) return;
      // Next needed, unassigned class.
      while (pos < agenda.size() && choice[agenda[pos]] != kNoId) ++pos;
      if (pos == agenda.size()) {
        best_cost = cost;
        best.assign(n, kNoId);
        for (Id c : agenda) best[c] = choice[c];
        return;
      }
      Id c = agenda[pos];
      for (Id nd : ix.nodes(c)) {
        double nc = node_cost_[nd];
        if (nc == kInfiniteCost || cost + nc >= best_cost) continue;
        NodeView<L> v = g_.node(nd);
        bool cyclic = false;
        for (Id k : v.kids) cyclic = cyclic || reaches(k, c);
        if (cyclic) continue;
        choice[c] = nd;
        std::size_t mark_agenda = agenda.size();
        for (Id k : v.kids)
          if (need[k]++ == 0) agenda.push_back(k);
        rec(pos + 1, cost + nc);
        for (Id k : v.kids) --need[k];
        agenda.resize(mark_agenda);
        choice[c] = kNoId;
        if (!complete) return;
      }
    };
    rec(0, 0.0);
    if (best_cost < res.cost) {
      res.cost = best_cost;
      res.choice = best;
    }
    res.optimal = complete;
  }

  EGraph<L, A>& g_;
  NodeCostFn cost_fn_;
  DagOptions opt_;
  std::vector<double> node_cost_;
  bool timed_out_ = false;
};

}  // namespace luminal::egraph
