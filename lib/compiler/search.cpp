#include "compiler/search.hpp"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <optional>
#include <string>
#include <unordered_map>
#include <unordered_set>

#include "cost/target_desc.hpp"
#include "ir/build.hpp"
#include "ir/kernel_body.hpp"
#include "luminal/egraph/extract.hpp"
#include "luminal/egraph/runner.hpp"
#include "luminal/error.hpp"
#include "rules/guided_focus.hpp"

namespace luminal::compiler {

namespace {

using Clock = std::chrono::steady_clock;
// Guided rounds after the first extraction (each: the guided passes on the program's
// kernels, then an extraction), while the estimate improves.
constexpr int kGuidedRounds = 6;
double since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

std::string fmt(const char* f, auto... a) {
  char buf[512];
  std::snprintf(buf, sizeof buf, f, a...);
  return buf;
}

ir::DimGuess guess_dims(const detail::GraphImpl& g) {
  ir::DimGuess d;
  for (const auto& decl : g.dims) d[decl.name] = std::max(decl.lo, std::min<int64_t>(decl.hi, 4096));
  return d;
}

// The kernel rules (engine rules of the pass sets: online-softmax), applied by the runner
// to every e-node like the math rules, up to `node_limit` nodes and `deadline`.
egraph::Report run_kernel_rules(ir::EGraph& g, const SearchSettings& s, std::size_t node_limit,
                                Clock::time_point deadline) {
  const CompileOptions& o = s.options;
  std::vector<std::string> sets(s.pass_sets.begin(), s.pass_sets.end());
  auto rules = rules::Registry::global().engine_rules(sets, o.fast_math, o.skip_rules);
  if (rules.empty()) return {};
  egraph::Runner<ir::TensorLang, ir::TensorAnalysis> runner(g);
  runner.iter_limit(4).node_limit(node_limit);
  if (deadline != Clock::time_point::max())
    runner.time_limit(std::max(std::chrono::duration<double>(deadline - Clock::now()).count(), 0.0));
  egraph::Report rep = runner.run(rules);
  if (s.trace)
    for (const auto& r : rep.rules)
      std::fprintf(stderr, "[luminal rules] %-32s matches=%zu applied=%zu time=%.5fs\n", r.name.c_str(),
                   r.matches, r.applied, r.search_s + r.apply_s);
  return rep;
}

using rules::Walk;
using rules::walk_choice;

// Whether an extraction's `choice` still describes a program on `g` after `g` grew: each
// class the program reaches has its chosen node, live and in that class. (Merging the
// guided passes' nodes keeps existing class ids, but congruence can join two classes
// that turn out equal, and dedupe a node.)
bool choice_holds(ir::EGraph& g, const std::vector<ir::Id>& roots, const std::vector<ir::Id>& choice) {
  return walk_choice(g, roots, choice, [&](ir::Id c) {
    if (c >= choice.size() || choice[c] == egraph::kNoId) return Walk::Stop;
    if (!g.is_live(choice[c]) || g.find(choice[c]) != c) return Walk::Stop;
    return Walk::Descend;
  });
}

}  // namespace

std::size_t guided_round(ir::EGraph& g, const SearchSettings& s, const std::vector<ir::Id>& roots,
                         const std::vector<ir::Id>& choice) {
  const CompileOptions& o = s.options;
  rules::PassContext ctx = s.ctx;
  ctx.roots = roots;
  ctx.deadline = s.deadline;
  ctx.node_limit = g.num_nodes() + static_cast<std::size_t>(std::max<int64_t>(o.node_limit, 1));
  rules::GuidedFocus f = rules::guided_focus(g, roots, choice);
  ctx.focus = std::move(f.focus);
  // A program without kernels (its outputs are its inputs: fast math's (x * 2) / 2 = x)
  // has nothing to guide the passes -- and an empty focus means every e-node to them (the
  // rule checker's mode): on that program absorb-views added 48,000 nodes and ran the
  // compile 25% past its budget.
  if (ctx.focus.empty()) return 0;
  ctx.wider = std::move(f.wider);
  ctx.wider_through_elementwise = std::move(f.wider_through_elementwise);
  ctx.first_node = g.num_node_ids();
  const std::size_t before = g.num_nodes();
  bool after_guided = false;
  for (const std::string& set : s.pass_sets)
    for (const rules::RuleInfo* r : rules::Registry::global().set(set, o.fast_math, o.skip_rules)) {
      if (!r->pass || set == "lower_reference" || (!r->guided && !after_guided)) continue;
      if (Clock::now() >= s.deadline || g.num_nodes() >= ctx.node_limit) break;
      const std::size_t n = r->pass(g, ctx);
      if (s.trace)
        std::fprintf(stderr, "[luminal rules] %-32s added=%zu (guided round)\n", r->name.c_str(), n);
      after_guided = after_guided || (r->guided && n > 0);
    }
  if (!after_guided) return 0;
  run_kernel_rules(g, s, ctx.node_limit, s.deadline);
  return g.num_nodes() - before;
}

std::unique_ptr<SaturatedGraph> saturate_graph(const detail::GraphImpl& graph, const SearchSettings& s) {
  auto out = std::make_unique<SaturatedGraph>();
  SaturatedGraph& res = *out;
  ir::EGraph& g = res.g;
  g.analysis().set_world(s.world);
  ir::Loaded loaded = ir::load_graph(g, graph);
  res.outputs = loaded.outputs;
  g.rebuild();
  const CompileOptions& o = s.options;
  const auto node_limit = static_cast<std::size_t>(std::max<int64_t>(o.node_limit, 1));
  std::vector<std::string>& stops = res.stops;
  // The time budget left, split between the phases so that the whole search ends by the
  // deadline: math rules up to 40% of it, lowering beyond the loaded program up to 55%,
  // fusion up to 85%, extraction's improvement of its greedy solution the rest. Each phase
  // stops at its mark; what is left of the program's lowering and the greedy extraction
  // are linear in the e-graph and run whatever the clock says.
  const auto search_start = Clock::now();
  const double left = std::max(std::chrono::duration<double>(s.deadline - search_start).count(), 0.0);
  auto mark = [&](double share) {
    if (s.deadline == Clock::time_point::max() || left > 1e9) return Clock::time_point::max();
    return search_start + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(left * share));
  };
  const Clock::time_point lower_deadline = mark(0.55), fuse_deadline = mark(0.85);

  // ---- phase 1: math rules to saturation or budget
  {
    auto t0 = Clock::now();
    rules::Registry::global().check_skippable(o.skip_rules);
    // The rule objects are immutable and the registry never changes: without skipped
    // rules they are built once per process (copying them was a fifth of a small
    // graph's compile).
    static const std::vector<rules::TensorRule> math_exact = rules::Registry::global().engine_rules(
                                                    {"algebra", "movement", "contraction"}, false),
                                                math_fast = rules::Registry::global().engine_rules(
                                                    {"algebra", "movement", "contraction"}, true);
    const std::vector<rules::TensorRule> math_skipping =
        o.skip_rules.empty() ? std::vector<rules::TensorRule>()
                             : rules::Registry::global().engine_rules({"algebra", "movement", "contraction"},
                                                                      o.fast_math, o.skip_rules);
    const std::vector<rules::TensorRule>& rules = !o.skip_rules.empty() ? math_skipping
                                                  : o.fast_math         ? math_fast
                                                                        : math_exact;
    const std::size_t n0 = g.num_nodes();
    if (rules.empty()) {
      res.phases.push_back(fmt("math: no rules registered; %zu nodes", n0));
    } else {
      // Fusion's work grows with the classes the math rules leave, and past saturation
      // they only add equivalent forms: the exact rules grow a program 1.3-2.2x (the
      // decode step 252 -> 561 nodes), fast math's associativity and distribution without
      // end (a 10-op chain 121 -> 54,000 nodes in 30 iterations, then 7 s of fusion).
      // So this phase may grow the e-graph to 16x the program (at least 4096 nodes).
      const std::size_t math_limit = std::min(node_limit, std::max<std::size_t>(16 * n0, 4096));
      egraph::Runner<ir::TensorLang, ir::TensorAnalysis> runner(g);
      runner.iter_limit(static_cast<std::size_t>(std::max<int64_t>(o.iteration_limit, 0)))
          .node_limit(math_limit)
          .time_limit(std::max(left * 0.4 - since(search_start), 0.0))
          .scheduler(std::make_shared<egraph::BackoffScheduler>(2000, 3));
      egraph::Report rep = runner.run(rules);
      res.iterations += static_cast<int64_t>(rep.iterations.size());
      const char* why = egraph::to_string(rep.stop);
      if (rep.stop != egraph::StopReason::Saturated) stops.push_back(std::string(why) + " (math rules)");
      res.phases.push_back(fmt("math: %zu rules, %zu iterations, %zu -> %zu nodes, %zu classes, %.4f s, %s",
                               rules.size(), rep.iterations.size(), n0, g.num_nodes(), g.num_classes(),
                               since(t0), why));
      if (s.trace)
        for (const auto& r : rep.rules)
          if (r.matches || r.applied)
            std::fprintf(stderr, "[luminal rules] %-32s matches=%zu applied=%zu banned=%zu time=%.5fs\n",
                         r.name.c_str(), r.matches, r.applied, r.times_banned, r.search_s + r.apply_s);
    }
  }

  // ---- phase 1b: sharding over the ranks (docs/distributed.md), its own phase: the
  // gathered variants spread through the saturated program without the algebra rules
  // re-deriving every form of every shard. The chain from a column-split projection to
  // the row-split one crosses every op of attention, hence twice the iteration budget.
  if (s.world > 1) {
    auto t0 = Clock::now();
    auto rules = rules::Registry::global().engine_rules({"sharding"}, o.fast_math, o.skip_rules);
    const std::size_t n0 = g.num_nodes();
    if (!rules.empty()) {
      egraph::Runner<ir::TensorLang, ir::TensorAnalysis> runner(g);
      const double left = std::chrono::duration<double>(s.deadline - Clock::now()).count();
      runner.iter_limit(static_cast<std::size_t>(std::max<int64_t>(2 * o.iteration_limit, 0)))
          .node_limit(n0 + node_limit)
          .time_limit(std::max(left * 0.5, 0.0))
          .scheduler(std::make_shared<egraph::BackoffScheduler>(2000, 3));
      egraph::Report rep = runner.run(rules);
      res.iterations += static_cast<int64_t>(rep.iterations.size());
      const char* why = egraph::to_string(rep.stop);
      if (rep.stop != egraph::StopReason::Saturated) stops.push_back(std::string(why) + " (sharding)");
      res.phases.push_back(fmt("sharding over %lld ranks: %zu rules, %zu iterations, %zu -> %zu nodes, %.4f s, %s",
                               static_cast<long long>(s.world), rules.size(), rep.iterations.size(), n0,
                               g.num_nodes(), since(t0), why));
      if (s.trace)
        for (const auto& r : rep.rules)
          if (r.matches || r.applied)
            std::fprintf(stderr, "[luminal rules] %-32s matches=%zu applied=%zu time=%.5fs\n", r.name.c_str(),
                         r.matches, r.applied, r.search_s + r.apply_s);
    }
  }

  // ---- phase 2: lowering (always complete) and fusion (within the budget)
  {
    rules::PassContext ctx = s.ctx;
    for (const auto& [name, cls] : loaded.outputs) ctx.roots.push_back(cls);
    for (ir::Id nd : loaded.cls)  // right after loading, a class id is its node's id
      if (nd != egraph::kNoId) ctx.spine.push_back(nd);
    // Its own node budget, counted from the end of the required lowering: neither the
    // math phase nor lowering (one kernel per math node) starves fusion.
    ctx.node_limit = std::numeric_limits<std::size_t>::max();
    bool budget_set = false;
    auto t0 = Clock::now();
    const std::size_t n0 = g.num_nodes();
    std::string skipped, lowering_cut;
    for (const std::string& set : s.pass_sets) {
      for (const rules::RuleInfo* r : rules::Registry::global().set(set, o.fast_math, o.skip_rules)) {
        if (!r->pass || r->guided) continue;  // guided passes: search_graph, after extracting
        const bool required = set == "lower_reference";
        if (!required && !budget_set) {
          ctx.node_limit = g.num_nodes() + node_limit;
          budget_set = true;
        }
        if (!required) {
          if (g.num_nodes() >= ctx.node_limit) {
            skipped = "node-limit";
            continue;
          }
          if (Clock::now() >= fuse_deadline) {
            skipped = "time-limit";
            continue;
          }
        }
        auto t1 = Clock::now();
        ctx.deadline = required ? lower_deadline : fuse_deadline;
        std::size_t added = r->pass(g, ctx);
        if (!required && g.num_nodes() >= ctx.node_limit) skipped = "node-limit";
        if (Clock::now() >= ctx.deadline) (required ? lowering_cut : skipped) = "time-limit";
        ++res.iterations;
        if (s.trace)
          std::fprintf(stderr, "[luminal rules] %-32s added=%zu time=%.5fs\n", r->name.c_str(), added,
                       since(t1));
      }
    }
    // The kernel rules (engine rules of the pass sets: online-softmax), applied by the
    // runner to every e-node like the math rules, within fusion's budget.
    if (Clock::now() < fuse_deadline) {
      const egraph::Report rep =
          run_kernel_rules(g, s, std::max(ctx.node_limit, g.num_nodes() + node_limit), fuse_deadline);
      res.iterations += static_cast<int64_t>(rep.iterations.size());
      if (rep.stop == egraph::StopReason::TimeLimit || rep.stop == egraph::StopReason::NodeLimit)
        skipped = egraph::to_string(rep.stop);
    }
    if (!lowering_cut.empty()) stops.push_back(lowering_cut + " (lowering: the loaded program and part of the rest)");
    if (!skipped.empty()) stops.push_back(skipped + " (fusion)");
    res.phases.push_back(fmt("lower+fuse: %zu -> %zu nodes, %zu classes, %.4f s%s%s", n0, g.num_nodes(),
                             g.num_classes(), since(t0), skipped.empty() ? "" : ", stopped by ",
                             skipped.c_str()));
  }

  // A merge of classes of different shapes or dtypes is a wrong rule (InternalError in
  // debug builds): never silent.
  if (const std::size_t bad = g.analysis().wrong_merges())
    stops.push_back(std::to_string(bad) + " wrong merge(s), a rule is wrong: " + g.analysis().first_wrong_merge());
  for (const auto& [name, cls] : loaded.outputs) res.roots.push_back(cls);
  return out;
}

KernelCost::KernelCost(const ir::EGraph& g, const detail::GraphImpl& graph, const detail::TargetDesc& target)
    : g_(&g), target_(target), dims_(guess_dims(graph)) {
  // Everything a call reads from outside the program: when it cannot stay in the
  // last-level cache from one call to the next (a decode step's weights and KV cache on
  // a GPU), every kernel reads its share from memory, however little that share is.
  double leaf_bytes = 0;
  for (const auto* ids : {&graph.inputs, &graph.params})
    for (uint32_t id : *ids)
      leaf_bytes += ir::guessed_numel(graph.nodes[id].shape, dims_) *
                    static_cast<double>(dtype_size(graph.nodes[id].dtype));
  leaves_from_memory_ = leaf_bytes > target.llc_bytes;
}

detail::KernelWork KernelCost::work_of(const ir::NodeView& v) const {
  // What the GPU renderers' lowering does differently (gpu::gpu_lower_options).
  const ir::LoweringTraits traits = target_.warp > 1 ? ir::LoweringTraits::gpu() : ir::LoweringTraits{};
  const ir::KernelSpec& spec = *g_->analysis().attrs().get(v.payload).kernel;
  const std::vector<ir::Id> kids(v.kids.begin(), v.kids.end());
  BodyKey key{spec.body.get(), spec.kind, {}, ir::body_launch_key(spec, traits)};
  for (ir::Id k : kids)
    key.leaves.push_back(ir::is_param_class(*g_, k) ? 2 : ir::is_leaf_class(*g_, k) ? 1 : 0);
  auto it = body_memo_.find(key);
  if (it == body_memo_.end())
    it = body_memo_.emplace(std::move(key), ir::body_work(*g_, spec, kids, dims_, traits)).first;
  detail::KernelWork w = it->second;
  ir::add_launch_work(w, spec);
  w.leaves_from_memory = leaves_from_memory_;
  return w;
}

double KernelCost::operator()(const ir::NodeView& v) const {
  if (v.op == ir::Op::Input || v.op == ir::Op::Param) return 0.0;
  if (v.op != ir::Op::Kernel) return egraph::kInfiniteCost;
  std::pair<uint32_t, std::vector<bool>> key{v.payload, {}};
  for (ir::Id k : v.kids) key.second.push_back(ir::is_leaf_class(*g_, k));
  auto it = memo_.find(key);
  if (it != memo_.end()) return it->second;
  const auto& spec = *g_->analysis().attrs().get(v.payload).kernel;
  // Attention as two passes is the math's definition, not a kernel a backend runs: the
  // online-softmax rule gives its class the streaming node.
  if (spec.kind == ir::KernelKind::AttentionTwoPass) return egraph::kInfiniteCost;
  double c = detail::kernel_seconds(target_, work_of(v));
  memo_.emplace(std::move(key), c);
  return c;
}

detail::KernelWork KernelCost::work(const ir::NodeView& v) const { return work_of(v); }

namespace {

/// LUMINAL_DEBUG_EXTRACT (docs/compiler.md): every kernel node of each class the plan
/// computes, with its own cost and its slots' classes (* where the plan computes them
/// anyway, else the cheapest node of the class alone): why a fused variant lost.
/// LUMINAL_DEBUG_EXTRACT_CLASS=N: every node of class N first, with kind and tile.
template <class Used>
void print_extraction(ir::EGraph& g, const KernelPlan& p, const std::vector<ir::Id>& choice,
                      const KernelCost& cost, Used used) {
  auto own = [&](ir::Id c) {
    double b = egraph::kInfiniteCost;
    for (ir::Id nd : g.index().nodes(c)) b = std::min(b, cost(g.node(nd)));
    return b;
  };
  auto kernel_text = [&](const ir::NodeView& v) {
    const auto& spec = *g.analysis().attrs().get(v.payload).kernel;
    std::string t = std::string(ir::kind_name(spec.kind)) + " " + std::to_string(spec.body->nodes.size()) + " nodes";
    if (!spec.launch.empty()) {
      t += ", tile";
      for (auto l : spec.launch) t += " " + std::to_string(l);
    }
    if (spec.kind == ir::KernelKind::AttentionTwoPass) return t;
    const detail::KernelWork w = cost.work(v);
    t += fmt(" [%.3g MFLOP, %.3g Mtransc, read %.3g MB, write %.3g MB, scratch %.3g MB, %g staged, par %.3g",
             w.flops * 1e-6, w.transcendentals * 1e-6, w.bytes_read * 1e-6, w.bytes_written * 1e-6,
             w.bytes_scratch * 1e-6, w.staged_kernels, w.parallelism);
    // (the shape facts the GPU model launches an attention by)
    if (w.attention_rows > 0)
      t += fmt(", %g rows x %g keys, dk %g, dv %g, %g rows a K row, %g-byte K", w.attention_rows,
               w.attention_keys, w.attention_depth, w.attention_width, w.attention_sharing,
               w.attention_kv_bytes);
    t += "]";
    return t;
  };
  if (const char* cl = std::getenv("LUMINAL_DEBUG_EXTRACT_CLASS"); cl && *cl) {
    const ir::Id c = g.find(static_cast<ir::Id>(std::strtoul(cl, nullptr, 10)));
    std::string shape;
    for (const auto& d : g.data(c).shape) shape += " " + d.to_string();
    std::fprintf(stderr, "[extract] class c%u, shape%s\n", c, shape.c_str());
    for (ir::Id nd : g.index().nodes(c)) {
      const ir::NodeView v = g.node(nd);
      const std::string what = v.op == ir::Op::Kernel ? kernel_text(v) : ir::op_name(v.op);
      std::fprintf(stderr, "[extract]   %s, %.3g us, slots", what.c_str(), cost(v) * 1e6);
      for (ir::Id k : v.kids) std::fprintf(stderr, " c%u%s", g.find(k), used(g.find(k)) ? "*" : "");
      std::fprintf(stderr, "\n");
    }
  }
  for (const auto& st : p.steps) {
    std::fprintf(stderr, "[extract] c%u: %.3g us\n", st.eclass, st.est_seconds * 1e6);
    for (ir::Id nd : g.index().nodes(st.eclass, ir::Op::Kernel)) {
      const ir::NodeView v = g.node(nd);
      std::fprintf(stderr, "[extract]   %s %s, %.3g us, slots", nd == choice.at(st.eclass) ? "=>" : "  ",
                   kernel_text(v).c_str(), cost(v) * 1e6);
      for (ir::Id k : v.kids) {
        const ir::Id kc = g.find(k);
        if (used(kc))
          std::fprintf(stderr, " c%u*", kc);
        else
          std::fprintf(stderr, " c%u(%.3g us)", kc, own(kc) * 1e6);
      }
      std::fprintf(stderr, "\n");
    }
  }
}

}  // namespace

egraph::DagOptions extraction_options() {
  egraph::DagOptions dopt;
  dopt.exact_class_limit = 24;
  dopt.exact_step_limit = 200000;
  dopt.improve_rounds = 4;
  return dopt;
}

SearchResult search_graph(const detail::GraphImpl& graph, const SearchSettings& s) {
  std::unique_ptr<SaturatedGraph> sat = saturate_graph(graph, s);
  ir::EGraph& g = sat->g;
  SearchResult res;
  res.iterations = sat->iterations;
  res.phases = sat->phases;
  std::vector<std::string> stops = sat->stops;
  // ---- phase 3: DAG-aware extraction over kernel nodes
  {
    auto t0 = Clock::now();
    KernelCost node_cost(g, graph, s.ctx.target);
    egraph::DagOptions dopt = extraction_options();
    dopt.deadline = s.deadline;
    // A sharded e-graph: a column split's gathers against a row split's all_reduce is a
    // choice along a whole chain of classes, which tree costs misjudge (DagOptions).
    // Not yet for every program, though it lowers every estimate: in a Llama decode step
    // it trades the streaming attention kernel for the decomposed one, which the cost
    // model prices at half (at its guessed 2048 keys) but which ran ~5% slower at 128-160
    // keys (docs/compiler.md, "Extraction"). The attention's price comes first.
    dopt.dag_greedy = s.world > 1;
    // Not yet for sharded programs either: on the 2-rank decode step of
    // tests/dist/tensor_parallel_test.cpp it adds an all_gather (4 where the plan without
    // it has 3), priced 2% cheaper and never measured. (Before each rank was priced with
    // its share of the host, per_rank_share, it traded one layer's all_reduce for an
    // all_gather, as absorb-producers did then, which measured 9-10% dearer.)
    dopt.fresh_children = s.world == 1;
    const std::vector<ir::Id>& roots = sat->roots;
    auto extract = [&](std::span<const ir::Id> seed = {}) {
      egraph::DagExtractor<ir::TensorLang, ir::TensorAnalysis, KernelCost> ex(g, node_cost, dopt);
      return ex.extract(roots, seed);
    };
    auto result = extract();
    // A deadline that cuts extraction short is a limit like any other: the report names
    // it and compile() does not cache the plan (another run may find a cheaper one).
    bool extraction_cut = result.timed_out;
    // The guided passes (absorb-views), applied to the kernels of the program just
    // extracted; the passes after them extend what they added (tile configurations, GPU
    // launches), the kernel rules run again (a streaming twin of an attention that
    // absorbed a view), and the program is extracted again. The better program is kept:
    // the e-graph only grew, so the new one is never worse unless the heuristic is.
    // Rounds repeat while the program gets cheaper: each fuses the new program's edges
    // (absorb-producers), so a chain of producers is fused one edge further per round.
    for (int round = 0; round < kGuidedRounds; ++round) {
      if (Clock::now() >= s.deadline) {
        extraction_cut = true;
        break;
      }
      const std::size_t added = guided_round(g, s, roots, result.choice);
      if (added == 0) break;
      if (Clock::now() >= s.deadline) {
        extraction_cut = true;
        break;
      }
      // (from the last program too, where it still holds: the heuristic restarted alone
      // can miss what the last round found)
      auto again = choice_holds(g, roots, result.choice) ? extract(result.choice) : extract();
      extraction_cut = extraction_cut || again.timed_out;
      if (s.trace)
        std::fprintf(stderr, "[luminal compile] guided round %d: %zu nodes, estimate %.4g -> %.4g s\n", round,
                     added, result.cost, again.cost);
      const bool better = again.cost < result.cost;
      if (better || !choice_holds(g, roots, result.choice)) result = std::move(again);
      if (!better) break;
    }
    if (extraction_cut) stops.push_back("time-limit (extraction)");
    res.est_seconds = result.cost;
    // ---- the plan: one value per used class, producers first (post-order walk)
    KernelPlan& p = res.plan;
    std::unordered_map<ir::Id, uint32_t> val;
    std::vector<std::pair<ir::Id, std::size_t>> stack;
    auto visit = [&](ir::Id root) {
      root = g.find(root);
      if (val.count(root)) return;
      stack.push_back({root, 0});
      while (!stack.empty()) {
        auto& [c, k] = stack.back();
        ir::NodeView v = g.node(result.choice.at(c));
        if (k < v.kids.size()) {
          ir::Id kc = g.find(v.kids[k++]);
          if (!val.count(kc)) stack.push_back({kc, 0});
          continue;
        }
        const ir::Id cls = c;
        stack.pop_back();
        if (val.count(cls)) continue;
        const ir::Attr& at = g.analysis().attrs().get(v.payload);
        if (v.op == ir::Op::Input || v.op == ir::Op::Param) {
          val[cls] = p.add_value(at.name, v.op == ir::Op::Param);
          continue;
        }
        if (v.op != ir::Op::Kernel)
          throw InternalError(std::string("[compile] extracted a math node: ") + ir::op_name(v.op));
        KernelPlan::Step st;
        st.spec = at.kernel;
        for (ir::Id kid : v.kids) st.args.push_back(val.at(g.find(kid)));
        st.result = val[cls] = p.add_value();
        st.est_seconds = node_cost(v);
        st.eclass = cls;
        p.steps.push_back(std::move(st));
      }
    };
    for (ir::Id r : roots) visit(r);
    for (std::size_t r = 0; r < sat->outputs.size(); ++r)
      p.outputs.emplace_back(sat->outputs[r].first, val.at(g.find(roots[r])));
    if (const char* dbg = std::getenv("LUMINAL_DEBUG_EXTRACT"); dbg && *dbg)
      print_extraction(g, p, result.choice, node_cost, [&](ir::Id c) { return val.count(c) > 0; });
    res.phases.push_back(fmt("extract: %zu kernels, estimated %.4g s per call, %s, %.4f s", p.steps.size(),
                             result.cost, result.optimal ? "optimal" : "heuristic", since(t0)));
  }
  res.egraph_nodes = static_cast<int64_t>(g.num_nodes());
  res.egraph_classes = static_cast<int64_t>(g.num_classes());
  if (stops.empty()) {
    res.stop_reason = "saturated";
  } else {
    for (const auto& x : stops) res.stop_reason += (res.stop_reason.empty() ? "" : "; ") + x;
  }
  return res;
}

}  // namespace luminal::compiler
