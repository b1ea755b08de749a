// The rule checker's driver (see check_support.hpp): per rule, random instances from the
// case generator (check_cases.hpp), the rule applied once, every node of every class
// evaluated and compared (check_eval.hpp).
#include "rules/check_support.hpp"

#include <algorithm>
#include <map>
#include <optional>
#include <span>

#include "backends/reference/kernels.hpp"
#include "luminal/egraph/extract.hpp"
#include "luminal/error.hpp"
#include "rules/check_cases.hpp"
#include "rules/check_eval.hpp"
#include "rules/guided_focus.hpp"

namespace luminal::rules::check {

namespace {

namespace rf = detail::reference;
using ir::Op;

// ------------------------------------------------------------------ one instance

enum class Verdict { Rejected, NotApplied, Checked, Failed };

struct Checker {
  const RuleInfo& rule;
  const Registry& reg;
  const Options& opt;
  Rng rng;
  Result res;

  // Builds one random instance of the rule's left side (or a random program, or the
  // rule's example) into `inst`.
  void build(Instance& inst, int attempt, int regime) {
    // Every other instance: a pass rule's example (fusion's attention, prologues) does
    // not replace the random programs, it joins them.
    const bool use_example = rule.example && attempt % 2 == 0;
    if (use_example) {
      // A guided pass also runs on sharded programs (the search's sharding phase first,
      // prerequisites): one of its own examples in eight over 2 or 3 ranks.
      if (rule.guided && attempt % 8 == 2) {
        inst.world = 2 + rng.below(2);
        inst.g.analysis().set_world(inst.world);
      }
      auto gi = rule.example(rng.g);
      if (!gi) throw Reject{"no example"};
      load_example(inst, rng, *gi);
      return;
    }
    if (rule.set == "sharding") {
      inst.world = 2 + rng.below(3);
      inst.g.analysis().set_world(inst.world);
    }
    if (rng.chance(1.0 / 3)) {
      inst.sym_value = 2 + rng.below(3);
      inst.sym = Dim::variable("n", 1, 8);
      inst.dims["n"] = inst.sym_value;
    }
    rng.zero_dims = rng.chance(0.25);
    rng.pools = rng.chance(0.4);
    Builder b(rng, inst, regime);
    if (rule.rule) {
      for (const Pat& p : rule.rule->lhs()) {
        Want w = random_want(rng);
        // A comparison yields bool: don't waste instances on roots of another dtype.
        const auto& root = p.nodes[p.root()];
        if (root.var < 0 && (root.op == Op::LessThan || root.op == Op::Equal)) w.dtype = DType::boolean;
        b.build(p, p.root(), w);
      }
    } else {
      Pat p;
      random_pattern(rng, p, 1 + rng.below(3));
      b.build(p, p.root(), random_want(rng));
    }
  }

  // Rules that must run before this one so that it has something to act on.
  void prerequisites(Instance& inst, int attempt, PassContext& ctx) {
    // A rule over MatMul nodes, on its example (primitive ops only): the products are
    // found first, as the math phase finds them (matmul-recognize).
    if (rule.rule && rule.example && rule.name != "matmul-recognize") {
      bool on_matmul = false;
      for (const Pat& p : rule.rule->lhs())
        for (const auto& n : p.nodes) on_matmul = on_matmul || (n.var < 0 && n.op == Op::MatMul);
      if (on_matmul)
        if (const RuleInfo* rec = reg.find("matmul-recognize")) apply_once(*rec, inst.g, opt.ctx);
    }
    // An engine rule over kernel nodes (the fusion set's online-softmax): the kernels it
    // acts on are made first, as the search makes them (lowering, then fusion).
    if (rule.rule && rule.set == "fusion") {
      if (rule.example)  // primitive ops: the products found first, as the math phase does
        if (const RuleInfo* rec = reg.find("matmul-recognize")) apply_once(*rec, inst.g, opt.ctx);
      for (const RuleInfo& r : reg.all())
        if (r.set == "lower_reference" && r.pass) apply_once(r, inst.g, opt.ctx);
      if (const RuleInfo* fuse = reg.find("fuse-producers")) apply_once(*fuse, inst.g, opt.ctx);
      return;
    }
    // Passes other than the base lowering act on kernel nodes: give them some first.
    if (!rule.pass || rule.set == "lower_reference") return;
    // A pass's own example is primitive ops: its products found first, as for rules.
    if (rule.example)
      if (const RuleInfo* rec = reg.find("matmul-recognize")) apply_once(*rec, inst.g, opt.ctx);
    // A guided pass on every other example of its own: in the mode the search runs it --
    // on the kernels of a program extracted from the example (PassContext::focus) and on
    // the wider products its classes are slices of (PassContext::wider), with the products
    // of shared operands merged first as the math phase merges them (matmul-siblings,
    // after matmul-transpose's other spellings) -- not only on every e-node, so what it
    // does only for a program is checked too.
    const bool guided = rule.guided && !inst.roots.empty() && attempt % 4 == 0;
    if (guided)
      for (const char* name : {"matmul-transpose", "matmul-siblings", "matmul-siblings-3"})
        if (const RuleInfo* sib = reg.find(name)) apply_once(*sib, inst.g, opt.ctx);
    // Over several ranks the sharding rules before the lowering, as the search's phase
    // 1b runs them: until none applies (these small examples stop in a few rounds; at most 8).
    if (inst.world > 1 && rule.guided)
      for (int round = 0; round < 8; ++round) {
        std::size_t applied = 0;
        for (const RuleInfo& r : reg.all())
          if (r.set == "sharding") applied += apply_once(r, inst.g, opt.ctx);
        if (applied == 0) break;
      }
    for (const RuleInfo& r : reg.all())
      if (r.set == "lower_reference" && r.pass) apply_once(r, inst.g, opt.ctx);
    // GPU schedules run after fusion in the search: their kernels are fused ones (a GEMM
    // with its operands' casts inside).
    // And on every other guided example, on the program the fusion policies' variants
    // make, as the default search extracts it (a row kernel of gate and up with SwiGLU
    // inside, which absorb-producers computes off the merged product's slices).
    if (rule.set == "schedule_gpu" || (guided && attempt % 8 == 0))
      if (const RuleInfo* fuse = reg.find("fuse-producers")) apply_once(*fuse, inst.g, opt.ctx);
    if (guided) {
      // The program of direct kernels with fewest kernels (leaves free, math nodes none).
      ir::EGraph& g = inst.g;
      auto cost = [](const ir::NodeView& v, std::span<const double> kc) {
        if (v.op == Op::Input || v.op == Op::Param) return 0.0;
        if (v.op != Op::Kernel) return egraph::kInfiniteCost;
        double s = 1;
        for (double c : kc) s += c;
        return s;
      };
      egraph::GreedyExtractor<ir::TensorLang, ir::TensorAnalysis, decltype(cost)> ex(g, cost);
      std::vector<Id> choice(g.num_node_ids(), egraph::kNoId);
      for (Id c : g.index().classes()) choice[c] = ex.best_node(c);
      std::vector<Id> roots;
      for (Id r : inst.roots) roots.push_back(g.find(r));
      GuidedFocus f = guided_focus(g, roots, choice);
      if (f.focus.empty()) return;
      ctx.roots = roots;
      ctx.focus = std::move(f.focus);
      ctx.wider = std::move(f.wider);
      ctx.wider_through_elementwise = std::move(f.wider_through_elementwise);
    }
  }

  Verdict run_one(int attempt, int regime) {
    Instance inst;
    PassContext ctx = opt.ctx;  // (a guided pass's focus: prerequisites)
    inst.fast_math = rule.fast_math;
    inst.g.analysis().set_strict_merges(false);  // a wrong merge is reported below, as a failure
    try {
      build(inst, attempt, regime);
      inst.g.rebuild();
      for (Id c : inst.g.index().classes()) {
        const ir::ClassData& d = inst.g.data(c);
        if (!d.valid || !concrete(d.shape, inst.dims)) throw Reject{"invalid class"};
      }
      prerequisites(inst, attempt, ctx);
    } catch (const Reject&) {
      return Verdict::Rejected;
    } catch (const Error&) {
      return Verdict::Rejected;  // the analysis refused a malformed random node
    }
    ir::EGraph& g = inst.g;
    std::map<std::string, rf::View> leaves;
    for (const Leaf& l : inst.leaves) leaves.emplace(l.name, leaf_value(rng, l, regime));

    // Values of the instance before the rule: one per node (every class is one node,
    // except kernel nodes the prerequisites added, which are checked with the rest).
    const size_t n0 = g.num_node_ids();
    std::vector<std::optional<Vals>> before(n0);
    try {
      for (Id nid = 0; nid < n0; ++nid) {
        if (!g.is_live(nid)) continue;
        egraph::NodeView<ir::TensorLang> v = g.node(nid);
        if (v.op == Op::Kernel) continue;
        std::vector<const Vals*> kids;
        for (Id k : v.kids) {
          Id kn = k;  // before any merge, a class id is its one math node's id
          if (!before[kn]) throw Reject{"child without value"};
          kids.push_back(&*before[kn]);
        }
        before[nid] = eval_all(g, v, kids, leaves, inst);
      }
    } catch (const Wrong& w) {
      return Verdict::Rejected;  // an ill-typed random instance, not the rule's fault
    } catch (const Reject&) {
      return Verdict::Rejected;
    }
    std::size_t applied = 0;
    try {
      applied = apply_once(rule, g, ctx);
    } catch (const std::exception& e) {
      fail(regime, std::string("applying the rule threw: ") + e.what(), g);
      return Verdict::Failed;
    }
    if (applied == 0) return Verdict::NotApplied;
    if (g.analysis().wrong_merges() > 0) {
      fail(regime, g.analysis().first_wrong_merge(), g);
      return Verdict::Failed;
    }

    // Reference value per class: the value of its first original node.
    const auto& ix = g.index();
    std::map<Id, Vals> val;
    for (Id nid = 0; nid < n0; ++nid)
      if (before[nid]) val.try_emplace(g.find(nid), *before[nid]);
    // Classes the rule created: the value of any node computable from valued children.
    std::vector<std::pair<Id, Id>> todo;  // (class, node)
    for (Id c : ix.classes())
      for (Id nid : ix.nodes(c)) todo.emplace_back(c, nid);
    try {
      for (bool progress = true; progress;) {
        progress = false;
        for (auto [c, nid] : todo) {
          if (val.count(c)) continue;
          egraph::NodeView<ir::TensorLang> v = g.node(nid);
          std::vector<const Vals*> kids;
          bool ready = true;
          for (Id k : v.kids) {
            auto it = val.find(g.find(k));
            if (it == val.end()) {
              ready = false;
              break;
            }
            kids.push_back(&it->second);
          }
          if (!ready) continue;
          val.emplace(c, eval_all(g, v, kids, leaves, inst));
          progress = true;
        }
      }
    } catch (const Wrong& w) {
      fail(regime, "a node the rule added cannot be evaluated: " + w.why, g);
      return Verdict::Failed;
    }

    // A rule that reorders a sum: each class holding one (a matmul or sum reduction of the
    // program as built) is compared within the rounding of its terms' magnitudes.
    std::map<Id, Vals> magnitude;
    if (rule.reorders_sum) {
      try {
        for (auto [c, nid] : todo) {
          egraph::NodeView<ir::TensorLang> v = g.node(nid);
          if (nid >= n0 || (v.op != Op::MatMul && v.op != Op::SumReduce) || magnitude.count(c) ||
              !is_float(g.data(c).dtype) || !val.count(c))
            continue;
          std::vector<Vals> abs_kids;
          for (Id k : v.kids) {
            Vals a;
            for (const rf::View& r : val.at(g.find(k))) a.push_back(absolute(r));
            abs_kids.push_back(std::move(a));
          }
          std::vector<const Vals*> kids;
          for (const Vals& a : abs_kids) kids.push_back(&a);
          magnitude.emplace(c, eval_all(g, v, kids, leaves, inst));
        }
      } catch (const Wrong& w) {
        fail(regime, "a sum's terms' magnitudes cannot be evaluated: " + w.why, g);
        return Verdict::Failed;
      }
    }

    // Every node of every class against its class value.
    int checked = 0;
    // Elements compared in classes the rule touched (a new node, or several nodes): a
    // fast-math rule skips non-finite ones, and an instance with none is no evidence.
    int64_t compared = 0, elsewhere = 0;
    for (auto [c, nid] : todo) {
      const bool touched = nid >= n0 || ix.nodes(c).size() > 1;
      auto cv = val.find(c);
      if (cv == val.end()) continue;
      const ir::ClassData& d = g.data(c);
      auto ds = concrete(d.shape, inst.dims);
      const rf::View& cv0 = cv->second.at(0);
      if (!ds || *ds != cv0.shape || d.dtype != cv0.dtype) {
        fail(regime,
             cat("class c", c, ": analysis says ") + (ds ? shape_str(*ds) : "symbolic") + " " +
                 std::string(dtype_name(d.dtype)) + ", value is " + shape_str(cv0.shape) + " " +
                 std::string(dtype_name(cv0.dtype)),
             g);
        return Verdict::Failed;
      }
      egraph::NodeView<ir::TensorLang> v = g.node(nid);
      std::vector<const Vals*> kids;
      bool ready = true;
      for (Id k : v.kids) {
        auto it = val.find(g.find(k));
        if (it == val.end()) {
          ready = false;
          break;
        }
        kids.push_back(&it->second);
      }
      if (!ready) continue;
      std::string why;
      try {
        auto mag = magnitude.find(c);
        const Agreement how = rule.fast_math           ? Agreement::FastMath
                              : mag != magnitude.end() ? Agreement::ReorderedSum
                                                       : Agreement::Exact;
        why = compare_all(cv->second, eval_all(g, v, kids, leaves, inst), how, touched ? compared : elsewhere,
                          mag != magnitude.end() ? &mag->second : nullptr, rule.declared_error);
      } catch (const Wrong& w) {
        why = w.why;
      }
      if (!why.empty()) {
        fail(regime, cat("node ", describe_node(g, nid), " of class c", c, ": ", why), g);
        return Verdict::Failed;
      }
      ++checked;
    }
    if (compared == 0) return Verdict::NotApplied;  // nothing in the rule's domain: no evidence
    res.nodes_checked += checked;
    if (inst.sym_value > 0 || !inst.dims.empty()) ++res.symbolic;
    bool empty = false, high_rank = false;
    for (const auto& [c, v] : val) {
      empty = empty || v.at(0).numel() == 0;
      high_rank = high_rank || v.at(0).shape.size() >= 4;
    }
    res.empty += empty;
    res.high_rank += high_rank;
    return Verdict::Checked;
  }

  void fail(int regime, const std::string& why, ir::EGraph& g) {
    ++res.failures;
    if (!res.first_failure.empty()) return;
    res.first_failure = std::string("[") + regime_name(regime) + " values] " + why + "\n";
    if (g.is_clean()) res.first_failure += dump(g);
  }
};

}  // namespace

Result check_rule(const RuleInfo& rule, const Registry& registry, const Options& opt) {
  std::mt19937_64 gen(opt.seed ^ std::hash<std::string>{}(rule.name));
  Checker ck{rule, registry, opt, Rng{gen}, Result{}};
  ck.res.name = rule.name;
  ck.res.set = rule.set;
  ck.res.fast_math = rule.fast_math;
  ck.res.reorders_sum = rule.reorders_sum;
  const int regimes = rule.fast_math ? 2 : kRegimes;
  for (int attempt = 0; attempt < opt.max_attempts && ck.res.instances < opt.instances; ++attempt) {
    // The regime with the fewest checked instances so far (rules reject and skip
    // instances unevenly; every regime must get its share of the evidence).
    int regime = attempt % regimes;
    for (int r = 0; r < regimes; ++r)
      if (ck.res.per_regime[r] < ck.res.per_regime[regime]) regime = r;
    switch (ck.run_one(attempt, regime)) {
      case Verdict::Rejected:
        ++ck.res.rejected;
        break;
      case Verdict::NotApplied:
        ++ck.res.attempts;
        ++ck.res.not_applied;
        break;
      case Verdict::Checked:
        ++ck.res.attempts;
        ++ck.res.instances;
        ++ck.res.per_regime[regime];
        break;
      case Verdict::Failed:
        ++ck.res.attempts;
        if (ck.res.failures >= 3) return ck.res;  // enough evidence
        break;
    }
  }
  return ck.res;
}

std::string to_string(const Result& r) {
  char buf[512];
  std::snprintf(
      buf, sizeof buf,
      "%-28s %-15s %-9s instances=%3d (mixed %d, positive %d, special %d, wide %d, extreme %d; "
      "symbolic %d, empty %d, rank>=4 %d) nodes=%5d tried=%d not-applied=%d ill-typed=%d failures=%d",
      r.name.c_str(), r.set.c_str(),
      r.fast_math      ? "fast-math"
      : r.reorders_sum ? "reorders"
                       : "",
      r.instances, r.per_regime[0], r.per_regime[1], r.per_regime[2], r.per_regime[3], r.per_regime[4],
      r.symbolic, r.empty, r.high_rank, r.nodes_checked, r.attempts, r.not_applied, r.rejected, r.failures);
  return buf;
}

}  // namespace luminal::rules::check