// Rewrite rules: a searcher (one pattern, or several roots sharing variables) and an
// applier (a right-side pattern per root, or a lambda), optionally guarded by a condition.
//
//   rule("comm-add", a + b, b + a)                          // pattern => pattern
//   rule("div-self", a / a, one, [](auto& g, const Match& m) { return !is_zero(g, m[a]); })
//   rule("fold", a + b, [](auto& g, const Match& m) { ... g.add(...); g.merge(...); })
//   multi_rule("share", patterns(matmul(x, w1), matmul(x, w2)), [](auto& g, const Match& m) {...})
//
// `rule()` returns a spec that converts to `Rule<L, A>` for whatever analysis the e-graph
// uses, so rule sets are written once per language.
#pragma once

#include <algorithm>
#include <cstdint>
#include <functional>
#include <limits>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "luminal/egraph/egraph.hpp"
#include "luminal/error.hpp"
#include "luminal/egraph/pattern.hpp"
#include "luminal/egraph/pattern_dsl.hpp"

namespace luminal::egraph {

/// The matches of one rule in one search: fixed-width rows (roots, then variables).
/// Row i is `rows[i * width .. (i + 1) * width)`; `rows` may be longer than size() * width.
struct Matches {
  PodVector<Id> rows;
  std::uint32_t width = 0;
  const VarTable* vars = nullptr;
  std::size_t count = 0;
  /// Number of matches.
  std::size_t size() const noexcept { return count; }
  /// Match i.
  Match operator[](std::size_t i) const noexcept { return Match(rows.data() + i * width, vars); }
  /// Forgets the matches, keeping the memory.
  void clear() noexcept { count = 0; }
  /// Room for one more row (grown geometrically; no per-row initialization).
  Id* push_row() {
    std::size_t need = (count + 1) * width;
    if (need > rows.size())
      rows.resize_uninit(std::max<std::size_t>(2 * rows.size(), std::size_t{64} * width + need));
    return rows.data() + (count++) * width;
  }
};

/// A rewrite rule over e-graphs of language L with analysis A.
template <Language L, class A = NoAnalysis>
class Rule {
 public:
  using Graph = EGraph<L, A>;
  /// A custom applier: may add nodes and merge classes. An application counts when the
  /// e-graph changed.
  using ApplyFn = std::function<void(Graph&, const Match&)>;
  /// A condition checked before applying a match.
  using CondFn = std::function<bool(Graph&, const Match&)>;

  /// A rule from runtime patterns (`rhs` has one pattern per root of `lhs`, or is empty
  /// when `apply` is given). Throws std::invalid_argument on an unbound right-side variable.
  Rule(std::string name, std::vector<Pattern<L>> lhs, std::vector<Pattern<L>> rhs, ApplyFn apply = {},
       CondFn cond = {})
      : name_(std::move(name)),
        lhs_(std::move(lhs)),
        rhs_(std::move(rhs)),
        apply_(std::move(apply)),
        cond_(std::move(cond)) {
    std::vector<const Pattern<L>*> ps;
    std::uint64_t bound = 0;
    for (const auto& p : lhs_) {
      ps.push_back(&p);
      bound |= p.vars();
    }
    for (const auto& p : rhs_)
      if (p.vars() & ~bound)
        throw Error("[egraph] rule '" + name_ + "': right side uses an unbound variable");
    if (!apply_ && rhs_.size() != lhs_.size())
      throw Error("[egraph] rule '" + name_ + "': needs one right side per left root, or an applier");
    program_ = Program<L>::compile(ps);
    for (const auto& p : rhs_) rhs_progs_.push_back(compile_rhs(p, program_.vars));
  }

  /// The rule's name (reports use it).
  const std::string& name() const noexcept { return name_; }
  /// Whether the rule is a plain pattern => pattern rewrite (no condition, no applier): its
  /// effect depends only on the classes a match binds, so a match already applied needs
  /// no second application (semi-naive matching may skip it).
  bool is_pure() const noexcept { return !apply_ && !cond_; }
  /// The compiled left side.
  const Program<L>& program() const noexcept { return program_; }
  /// The left-side patterns.
  const std::vector<Pattern<L>>& lhs() const noexcept { return lhs_; }

  /// Appends the matches on the rebuilt e-graph to `out`; stops after `limit` + 1 matches,
  /// or (with `limits`) once their time or memory limit has passed, checked every
  /// `check_every` matches. Returns the number found (limit + 1 means "more than limit").
  /// With `since` > 0 (semi-naive; only for pure rules, see `is_pure`) matches that are
  /// not fresh (Machine) are counted but not stored: the caller applied all of them when
  /// it searched at epoch `since`, so applying them again could not change the e-graph.
  std::size_t search(const Graph& g, const ClassIndex<L>& ix, Matches& out,
                     std::size_t limit = std::numeric_limits<std::size_t>::max(),
                     const Limits* limits = nullptr, std::uint32_t since = 0) const {
    if (out.count != 0 && out.width != program_.vars.width)
      throw Error("[egraph] search: Matches of another rule");
    out.width = program_.vars.width;
    out.vars = &program_.vars;
    std::size_t count = 0;
    std::uint32_t ticks = 0;
    const std::uint32_t* keep = program_.keep.data();
    const std::size_t w = program_.keep.size();
    auto yield = [&](const Id* regs, bool fresh) {
      if (limits && ++ticks >= limits->check_every) {
        ticks = 0;
        StopReason why;
        if (limits->passed(why)) return false;
      }
      if (!fresh) return ++count <= limit;
      Id* dst = out.push_row();
      switch (w) {  // the common widths without a loop
        case 5:
          dst[4] = regs[keep[4]];
          [[fallthrough]];
        case 4:
          dst[3] = regs[keep[3]];
          [[fallthrough]];
        case 3:
          dst[2] = regs[keep[2]];
          [[fallthrough]];
        case 2:
          dst[1] = regs[keep[1]];
          [[fallthrough]];
        case 1:
          dst[0] = regs[keep[0]];
          break;
        default:
          for (std::size_t i = 0; i < w; ++i) dst[i] = regs[keep[i]];
      }
      return ++count <= limit;
    };
    Machine<L, A, decltype(yield)> m(g, ix, program_, yield, since);
    m.run();
    return count;
  }

  /// Counts the matches without storing them.
  std::size_t count(const Graph& g, const ClassIndex<L>& ix) const {
    std::size_t count = 0;
    auto yield = [&](const Id*, bool) {
      ++count;
      return true;
    };
    Machine<L, A, decltype(yield)> m(g, ix, program_, yield);
    m.run();
    return count;
  }

  /// Applies every match (conditions checked first); returns the effective applications.
  /// Under limits armed on `g` (EGraph::arm_limits) it may stop with BudgetExceeded; the
  /// effective applications so far are then in `*applied_so_far` when given.
  std::size_t apply(Graph& g, const Matches& ms, std::size_t* applied_so_far = nullptr) const {
    std::size_t local = 0;
    std::size_t& applied = applied_so_far ? *applied_so_far : local;
    applied = 0;
    std::vector<Id> ids;
    // Software pipelining: the hashcons probe of a match a few places ahead is started
    // now, so its cache miss overlaps the work on this one.
    constexpr std::size_t kAhead = 6;
    const bool can_prefetch = !apply_ && !rhs_progs_.empty() && !rhs_progs_[0].leaf_steps.empty();
    const bool limited = g.armed_limits() != nullptr;
    // Newest match first. Search finds matches class by class in ascending id order, and
    // a class's parents are mostly newer than it (a node is created after its children).
    // Applied oldest first, merges of small classes made their parents' hashcons keys
    // stale before those parents' own matches ran, so their right sides missed the
    // hashcons, were created again and had to be merged back: W3 (ac-blowup) iteration 7
    // made 101,826 effective unions + 20,715 congruence unions; top-down, 40,748 + 498
    // (egg, whose match order is hash order: 57,428 + 7,182). Same final e-graph.
    for (std::size_t n = ms.size(), i = n; i-- > 0;) {
      if (limited) g.poll_limits();  // matches that change nothing must not outrun the clock
      if (can_prefetch && i >= kAhead) prefetch(g, rhs_progs_[0], ms[i - kAhead].row());
      Match m = ms[i];
      if (cond_ && !cond_(g, m)) continue;
      if (apply_) {
        std::uint64_t v = g.version();
        apply_(g, m);
        applied += g.version() != v;
        continue;
      }
      for (std::size_t r = 0; r < rhs_progs_.size(); ++r)
        applied += g.merge(m.root(r), build(g, rhs_progs_[r], m.row(), ids)) ? 1 : 0;
    }
    return applied;
  }

  /// Adds pattern `p` with variables taken from `m`; returns its class (the general
  /// path, for custom appliers; rules with right-side patterns use a precompiled form).
  static Id instantiate(Graph& g, const Pattern<L>& p, const Match& m, std::vector<Id>& ids) {
    ids.resize(p.nodes.size());
    Id kids[16];
    for (std::size_t j = 0; j < p.nodes.size(); ++j) {
      const auto& n = p.nodes[j];
      if (n.var >= 0) {
        ids[j] = m.var(n.var);
        continue;
      }
      std::vector<Id> big;
      Id* kb = kids;
      if (n.nkids > 16) {
        big.resize(n.nkids);
        kb = big.data();
      }
      for (std::uint32_t k = 0; k < n.nkids; ++k) kb[k] = ids[p.kids[n.kid_begin + k]];
      ids[j] = g.add(n.op, n.payload, std::span<const Id>(kb, n.nkids));
    }
    return ids.back();
  }

 private:
  // A right side compiled for instantiation: op nodes in post-order, each child read
  // from the match row (a variable) or from an earlier step's result.
  struct RhsStep {
    typename L::Op op;
    std::uint32_t nkids;
    std::uint32_t src_begin;  // into RhsProg::srcs
    typename L::Payload payload;
  };
  // Values are numbered: match-row positions first (0..width), then step results.
  struct RhsProg {
    std::vector<RhsStep> steps;
    std::vector<std::uint32_t> srcs;  // value number of each child
    std::uint32_t width = 0;          // match row width
    std::uint32_t root_src = 0;       // when the right side is a bare variable
    bool root_is_var = false;
    std::vector<std::uint32_t> leaf_steps;  // steps whose children are all variables
  };

  static RhsProg compile_rhs(const Pattern<L>& p, const VarTable& vt) {
    RhsProg prog;
    prog.width = vt.width;
    std::vector<std::uint32_t> src_of(p.nodes.size());
    for (std::size_t j = 0; j < p.nodes.size(); ++j) {
      const auto& n = p.nodes[j];
      if (n.var >= 0) {
        src_of[j] = static_cast<std::uint32_t>(vt.slot[static_cast<std::size_t>(n.var)]);
        continue;
      }
      RhsStep st{n.op, n.nkids, static_cast<std::uint32_t>(prog.srcs.size()), n.payload};
      for (std::uint32_t k = 0; k < n.nkids; ++k) prog.srcs.push_back(src_of[p.kids[n.kid_begin + k]]);
      src_of[j] = vt.width + static_cast<std::uint32_t>(prog.steps.size());
      prog.steps.push_back(st);
    }
    for (std::uint32_t i = 0; i < prog.steps.size(); ++i) {
      bool leaf = prog.steps[i].nkids <= 16;
      for (std::uint32_t k = 0; k < prog.steps[i].nkids; ++k)
        leaf = leaf && prog.srcs[prog.steps[i].src_begin + k] < vt.width;
      if (leaf) prog.leaf_steps.push_back(i);
    }
    prog.root_is_var = p.nodes.back().var >= 0;
    prog.root_src = src_of.back();
    return prog;
  }

  // Steps whose children are all variables have keys known from the match alone: the
  // classes as matched, canonical unless merged since (then the hint is merely wasted).
  static void prefetch(const Graph& g, const RhsProg& prog, const Id* row) {
    Id kids[16];
    for (std::uint32_t i : prog.leaf_steps) {
      const RhsStep& st = prog.steps[i];
      const std::uint32_t* src = prog.srcs.data() + st.src_begin;
      for (std::uint32_t k = 0; k < st.nkids; ++k) kids[k] = row[src[k]];  // all < width
      g.prefetch_add(st.op, st.payload, std::span<const Id>(kids, st.nkids));
    }
  }

  static Id build(Graph& g, const RhsProg& prog, const Id* row, std::vector<Id>& spill) {
    if (prog.root_is_var) return row[prog.root_src];
    const std::size_t nsteps = prog.steps.size();
    const std::size_t nvals = prog.width + nsteps;
    Id local[48];
    Id* vals = local;
    if (nvals > 48) [[unlikely]] {
      spill.resize(nvals);
      vals = spill.data();
    }
    for (std::uint32_t i = 0; i < prog.width; ++i) vals[i] = row[i];
    Id kids[16];
    for (std::size_t i = 0; i < nsteps; ++i) {
      const RhsStep& st = prog.steps[i];
      const std::uint32_t* src = prog.srcs.data() + st.src_begin;
      Id* out = vals + prog.width + i;
      switch (st.nkids) {
        case 0:
          *out = g.add(st.op, st.payload, std::span<const Id>());
          break;
        case 1:
          kids[0] = vals[src[0]];
          *out = g.add(st.op, st.payload, std::span<const Id>(kids, 1));
          break;
        case 2:
          kids[0] = vals[src[0]];
          kids[1] = vals[src[1]];
          *out = g.add(st.op, st.payload, std::span<const Id>(kids, 2));
          break;
        default: {
          std::vector<Id> big(st.nkids);
          for (std::uint32_t k = 0; k < st.nkids; ++k) big[k] = vals[src[k]];
          *out = g.add(st.op, st.payload, std::span<const Id>(big));
        }
      }
    }
    return vals[nvals - 1];
  }

  std::vector<RhsProg> rhs_progs_;
  std::string name_;
  std::vector<Pattern<L>> lhs_;
  std::vector<Pattern<L>> rhs_;
  ApplyFn apply_;
  CondFn cond_;
  Program<L> program_;
};

// ---------------------------------------------------------------------- rule specs

/// Marker for "no callable".
struct NoFn {};

/// A rule before it is bound to an analysis type; converts to any `Rule<L, A>`.
template <Language L, class Ap = NoFn, class Co = NoFn>
struct RuleSpec {
  std::string name;
  std::vector<Pattern<L>> lhs;
  std::vector<Pattern<L>> rhs;
  Ap applier;
  Co cond;

  /// The same rule guarded by `c(egraph, match) -> bool`.
  template <class C>
  RuleSpec<L, Ap, C> when(C c) const {
    return {name, lhs, rhs, applier, std::move(c)};
  }

  template <class A>
  operator Rule<L, A>() const {  // NOLINT: implicit on purpose (rule lists)
    typename Rule<L, A>::ApplyFn ap;
    typename Rule<L, A>::CondFn co;
    if constexpr (!std::is_same_v<Ap, NoFn>) {
      ap = [f = applier](EGraph<L, A>& g, const Match& m) { f(g, m); };
    }
    if constexpr (!std::is_same_v<Co, NoFn>) {
      co = [f = cond](EGraph<L, A>& g, const Match& m) { return static_cast<bool>(f(g, m)); };
    }
    return Rule<L, A>(name, lhs, rhs, std::move(ap), std::move(co));
  }
};

/// Several pattern expressions (the roots of a multi-pattern, or their right sides).
template <PatternExpr... Ps>
struct PatternList {
  std::tuple<Ps...> items;
  static constexpr std::uint64_t vars = (std::uint64_t{0} | ... | Ps::vars);
};

/// Groups pattern expressions: `patterns(matmul(x, w1), matmul(x, w2))`.
template <PatternExpr... Ps>
constexpr PatternList<std::remove_cvref_t<Ps>...> patterns(Ps&&... ps) {
  return {{std::forward<Ps>(ps)...}};
}

namespace detail {
template <class T>
struct lang_of {
  using type = typename T::Lang;
};
}  // namespace detail

/// `lhs => rhs`. A right-side variable not bound on the left does not compile.
template <PatternExpr Lhs, PatternExpr Rhs>
auto rule(std::string name, const Lhs& lhs, const Rhs& rhs) {
  static_assert(detail::is_pnode<Lhs>::value, "a rule's left side must be an op node, not a bare variable");
  static_assert((Rhs::vars & ~Lhs::vars) == 0,
                "the right side uses a variable that the left side does not bind");
  using L = typename Lhs::Lang;
  return RuleSpec<L>{std::move(name), {to_pattern<L>(lhs)}, {to_pattern<L>(rhs)}, NoFn{}, NoFn{}};
}

/// `lhs => rhs if cond(egraph, match)`.
template <PatternExpr Lhs, PatternExpr Rhs, class Cond>
requires(!PatternExpr<Cond>) auto rule(std::string name, const Lhs& lhs, const Rhs& rhs, Cond cond) {
  return rule(std::move(name), lhs, rhs).when(std::move(cond));
}

/// `lhs => applier(egraph, match)`: the lambda adds nodes and merges classes itself.
template <PatternExpr Lhs, class Fn>
requires(!PatternExpr<Fn>) auto rule(std::string name, const Lhs& lhs, Fn applier) {
  static_assert(detail::is_pnode<Lhs>::value, "a rule's left side must be an op node, not a bare variable");
  using L = typename Lhs::Lang;
  return RuleSpec<L, Fn>{std::move(name), {to_pattern<L>(lhs)}, {}, std::move(applier), NoFn{}};
}

/// A multi-pattern rule: every combination of root matches that agrees on shared
/// variables is passed to `applier(egraph, match)` (`match.root(i)` is root i's class).
template <PatternExpr P0, PatternExpr... Ps, class Fn>
requires(!PatternExpr<Fn>) auto multi_rule(std::string name, const PatternList<P0, Ps...>& lhs, Fn applier) {
  using L = typename P0::Lang;
  std::vector<Pattern<L>> pats;
  std::apply([&](const auto&... p) { (pats.push_back(to_pattern<L>(p)), ...); }, lhs.items);
  return RuleSpec<L, Fn>{std::move(name), std::move(pats), {}, std::move(applier), NoFn{}};
}

/// A multi-pattern rule with one right side per root: root i is merged with rhs i.
template <PatternExpr P0, PatternExpr... Ps, PatternExpr... Rs>
auto multi_rule(std::string name, const PatternList<P0, Ps...>& lhs, const PatternList<Rs...>& rhs) {
  static_assert(sizeof...(Rs) == 1 + sizeof...(Ps), "one right side per root");
  static_assert((PatternList<Rs...>::vars & ~PatternList<P0, Ps...>::vars) == 0,
                "the right side uses a variable that the left side does not bind");
  using L = typename P0::Lang;
  std::vector<Pattern<L>> l, r;
  std::apply([&](const auto&... p) { (l.push_back(to_pattern<L>(p)), ...); }, lhs.items);
  std::apply([&](const auto&... p) { (r.push_back(to_pattern<L>(p)), ...); }, rhs.items);
  return RuleSpec<L>{std::move(name), std::move(l), std::move(r), NoFn{}, NoFn{}};
}

}  // namespace luminal::egraph
