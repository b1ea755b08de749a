// The runner: equality saturation with limits, schedulers, phases and reports.
//
// One iteration (exactly the semantics of the standard workloads, which makes node and
// class counts reproducible):
//   1. search every rule on the same rebuilt e-graph (nothing changes while searching);
//   2. apply every match, rule by rule (conditions checked at apply time);
//   3. rebuild once.
// It stops on saturation (an iteration changed nothing and the scheduler agrees) or on the
// first limit hit: iterations, e-nodes, wall time, resident memory.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <limits>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "luminal/egraph/egraph.hpp"
#include "luminal/egraph/limits.hpp"
#include "luminal/egraph/memory.hpp"
#include "luminal/egraph/rule.hpp"

namespace luminal::egraph {

/// Decides, per rule and iteration, how many matches a rule may produce.
class Scheduler {
 public:
  virtual ~Scheduler() = default;
  /// Called once before a run with the number of rules.
  virtual void start(std::size_t /*nrules*/) {}
  /// 0: skip the rule this iteration; otherwise the most matches it may produce
  /// (more than that is reported to `accept` as limit + 1).
  virtual std::size_t match_limit(std::size_t /*rule*/, std::size_t /*iteration*/) {
    return std::numeric_limits<std::size_t>::max();
  }
  /// After searching: false discards the matches (the rule is throttled).
  virtual bool accept(std::size_t /*rule*/, std::size_t /*iteration*/, std::size_t /*matches*/) {
    return true;
  }
  /// When an iteration changed nothing: true lets the run stop as saturated.
  virtual bool can_stop(std::size_t /*iteration*/) { return true; }
  /// How often the rule was banned so far.
  virtual std::size_t times_banned(std::size_t /*rule*/) const { return 0; }
};

/// Every rule, every match, every iteration.
class SimpleScheduler final : public Scheduler {};

/// egg's backoff scheduler: a rule that finds more than `match_limit << times_banned`
/// matches is banned for `ban_length << times_banned` iterations and its matches dropped;
/// explosive rules (associativity, commutativity) are throttled rather than removed.
class BackoffScheduler final : public Scheduler {
 public:
  /// Defaults as egg's: 1000 matches, 5 iterations.
  explicit BackoffScheduler(std::size_t match_limit = 1000, std::size_t ban_length = 5)
      : match_limit_(match_limit), ban_length_(ban_length) {}
  void start(std::size_t nrules) override { stats_.assign(nrules, Stat{}); }
  std::size_t match_limit(std::size_t rule, std::size_t iteration) override {
    const Stat& s = stats_[rule];
    if (iteration < s.banned_until) return 0;
    return threshold(s);
  }
  bool accept(std::size_t rule, std::size_t iteration, std::size_t matches) override {
    Stat& s = stats_[rule];
    if (matches <= threshold(s)) return true;
    std::size_t len = ban_length_ << std::min<std::size_t>(s.times_banned, 40);
    ++s.times_banned;
    s.banned_until = iteration + len;
    return false;
  }
  bool can_stop(std::size_t iteration) override {
    std::size_t min_ban = std::numeric_limits<std::size_t>::max();
    for (const Stat& s : stats_)
      if (s.banned_until > iteration) min_ban = std::min(min_ban, s.banned_until - iteration);
    if (min_ban == std::numeric_limits<std::size_t>::max()) return true;
    // Nothing else to do: fast-forward the bans instead of idling through iterations.
    for (Stat& s : stats_)
      if (s.banned_until > iteration) s.banned_until -= min_ban;
    return false;
  }
  std::size_t times_banned(std::size_t rule) const override { return stats_[rule].times_banned; }

 private:
  struct Stat {
    std::size_t times_banned = 0;
    std::size_t banned_until = 0;
  };
  std::size_t threshold(const Stat& s) const {
    return match_limit_ << std::min<std::size_t>(s.times_banned, 40);
  }
  std::size_t match_limit_;
  std::size_t ban_length_;
  std::vector<Stat> stats_;
};

/// Per-rule totals of a run.
struct RuleStats {
  std::string name;
  std::size_t matches = 0;       ///< matches found (accepted by the scheduler)
  std::size_t fresh = 0;         ///< of those, applied (not already applied: semi-naive)
  std::size_t applied = 0;       ///< applications that changed the e-graph
  std::size_t times_banned = 0;  ///< bans by the scheduler
  double search_s = 0;
  double apply_s = 0;
};

/// One iteration of a run.
struct IterationStats {
  std::size_t iteration = 0;  ///< 1-based, counted across phases
  std::string phase;
  std::size_t nodes = 0;    ///< e-nodes after the rebuild
  std::size_t classes = 0;  ///< e-classes after the rebuild
  std::size_t matches = 0;
  std::size_t fresh = 0;  ///< matches applied (the rest were applied before: semi-naive)
  std::size_t applied = 0;
  std::size_t rebuild_unions = 0;  ///< merges found by congruence
  double search_s = 0;
  double apply_s = 0;
  double rebuild_s = 0;
  double total_s() const noexcept { return search_s + apply_s + rebuild_s; }
};

/// What a run did and why it stopped. `to_string()` prints it.
struct Report {
  std::vector<IterationStats> iterations;
  std::vector<RuleStats> rules;
  StopReason stop = StopReason::Saturated;
  std::size_t nodes = 0;
  std::size_t classes = 0;
  double total_s = 0;
  double search_s = 0;
  double apply_s = 0;
  double rebuild_s = 0;

  /// A human-readable table: one line per iteration, one per rule, then totals.
  std::string to_string() const {
    std::ostringstream os;
    char buf[256];
    for (const auto& it : iterations) {
      std::snprintf(buf, sizeof buf,
                    "iter %zu%s%s: nodes=%zu classes=%zu matches=%zu fresh=%zu applied=%zu search=%.4fs "
                    "apply=%.4fs rebuild=%.4fs\n",
                    it.iteration, it.phase.empty() ? "" : " ", it.phase.c_str(), it.nodes, it.classes,
                    it.matches, it.fresh, it.applied, it.search_s, it.apply_s, it.rebuild_s);
      os << buf;
    }
    for (const auto& r : rules) {
      std::snprintf(buf, sizeof buf,
                    "rule %-16s matches=%zu fresh=%zu applied=%zu banned=%zu search=%.4fs apply=%.4fs\n",
                    r.name.c_str(), r.matches, r.fresh, r.applied, r.times_banned, r.search_s, r.apply_s);
      os << buf;
    }
    std::snprintf(buf, sizeof buf,
                  "stop=%s nodes=%zu classes=%zu total=%.4fs search=%.4fs apply=%.4fs rebuild=%.4fs\n",
                  luminal::egraph::to_string(stop), nodes, classes, total_s, search_s, apply_s, rebuild_s);
    os << buf;
    return os.str();
  }
};

/// Runs rule sets on an e-graph (see the file comment).
template <Language L, class A = NoAnalysis>
class Runner {
 public:
  using Graph = EGraph<L, A>;
  using Rules = std::vector<Rule<L, A>>;

  /// A named rule set run to its own limits; phases run one after another.
  struct Phase {
    std::string name;
    const Rules* rules = nullptr;
    std::size_t iter_limit = 30;
  };

  /// A runner over `g` (kept by reference) with the simple scheduler and no limits but 30
  /// iterations.
  explicit Runner(Graph& g) : g_(g), scheduler_(std::make_shared<SimpleScheduler>()) {}

  Runner& iter_limit(std::size_t n) {
    iter_limit_ = n;
    return *this;
  }  ///< iterations
  Runner& node_limit(std::size_t n) {
    node_limit_ = n;
    return *this;
  }  ///< e-nodes
  Runner& time_limit(double seconds) {
    time_limit_ = seconds;
    return *this;
  }  ///< wall time
  Runner& memory_limit_mb(double mb) {
    memory_limit_mb_ = mb;
    return *this;
  }  ///< resident set
  /// The scheduler (SimpleScheduler by default; BackoffScheduler throttles).
  Runner& scheduler(std::shared_ptr<Scheduler> s) {
    scheduler_ = std::move(s);
    return *this;
  }
  /// Semi-naive matching (on by default): a pure rule (pattern => pattern) is not applied
  /// again to a match that its previous complete search already found and applied --
  /// one whose nodes and classes have not changed since (EGraph::next_epoch). Such an
  /// application could not change the e-graph, so every iteration ends with the same
  /// e-graph either way; `false` applies every match (as egg does).
  Runner& semi_naive(bool on) {
    semi_naive_ = on;
    return *this;
  }
  /// Called after each iteration (for progress output).
  Runner& on_iteration(std::function<void(const IterationStats&)> f) {
    hook_ = std::move(f);
    return *this;
  }

  /// Runs `rules` until saturation or a limit.
  Report run(const Rules& rules) {
    Report rep;
    run_phase(rules, "", iter_limit_, rep);
    finish(rep);
    return rep;
  }

  /// Runs each phase to saturation or its iteration limit, then the next; the global
  /// limits (nodes, time, memory) apply to the whole run and stop it.
  Report run_phases(const std::vector<Phase>& phases) {
    Report rep;
    for (const Phase& p : phases) {
      StopReason why = run_phase(*p.rules, p.name, p.iter_limit, rep);
      if (why != StopReason::Saturated && why != StopReason::IterationLimit) break;
    }
    finish(rep);
    return rep;
  }

 private:
  using Clock = std::chrono::steady_clock;
  static double seconds(Clock::time_point a, Clock::time_point b) {
    return std::chrono::duration<double>(b - a).count();
  }

  StopReason run_phase(const Rules& rules, const std::string& phase, std::size_t iter_limit, Report& rep) {
    if (!started_) {
      start_ = Clock::now();
      started_ = true;
      limits_.node_limit = node_limit_;
      limits_.memory_limit_mb = memory_limit_mb_;
      limits_.deadline = time_limit_ < 1e9 ? start_ + std::chrono::duration_cast<Clock::duration>(
                                                            std::chrono::duration<double>(time_limit_))
                                           : Clock::time_point::max();
    }
    const std::size_t first_rule = rep.rules.size();
    for (const auto& r : rules) rep.rules.push_back(RuleStats{r.name()});
    scheduler_->start(rules.size());
    if (!g_.is_clean()) g_.rebuild();
    std::vector<Matches> found(rules.size());
    // Semi-naive matching: since[r] is the epoch of rule r's last search whose every match
    // was applied; matches older than it are not applied again (pure rules only).
    std::vector<std::uint32_t> since(rules.size(), 0);
    std::vector<char> complete(rules.size(), 0);
    for (std::size_t it = 0;; ++it) {
      StopReason why;
      if (limit_hit(it, iter_limit, why)) {
        rep.stop = why;
        return why;
      }
      IterationStats st;
      st.iteration = rep.iterations.size() + 1;
      st.phase = phase;
      const std::uint64_t v0 = g_.version();
      // A limit passed inside the iteration (while searching or applying): the iteration
      // is finished (rebuilt, reported) and the run stops with that reason.
      bool stopped = false;
      StopReason stopped_by = StopReason::Saturated;
      auto t0 = Clock::now();
      const ClassIndex<L>& ix = g_.index();
      const std::uint32_t epoch = g_.next_epoch();
      for (std::size_t r = 0; r < rules.size(); ++r) {
        found[r].clear();
        complete[r] = 0;
        if (stopped) continue;
        std::size_t lim = scheduler_->match_limit(r, it);
        if (lim == 0) continue;
        auto a = Clock::now();
        const std::uint32_t from = semi_naive_ && rules[r].is_pure() ? since[r] : 0;
        std::size_t n = rules[r].search(g_, ix, found[r], lim, &limits_, from);
        RuleStats& rs = rep.rules[first_rule + r];
        if (scheduler_->accept(r, it, n)) {
          complete[r] = 1;
          rs.matches += n;
          st.matches += n;
          rs.fresh += found[r].size();
          st.fresh += found[r].size();
        } else {
          found[r].clear();
        }
        auto b = Clock::now();
        rs.search_s += seconds(a, b);
        if (b >= limits_.deadline) {
          stopped = true;
          stopped_by = StopReason::TimeLimit;
        }
      }
      auto t1 = Clock::now();
      st.search_s = seconds(t0, t1);
      g_.arm_limits(&limits_);
      for (std::size_t r = 0; r < rules.size() && !stopped; ++r) {
        if (found[r].size() == 0) {
          if (complete[r]) since[r] = epoch;
          continue;
        }
        auto a = Clock::now();
        std::size_t n = 0;
        try {
          rules[r].apply(g_, found[r], &n);
          if (complete[r]) since[r] = epoch;
        } catch (const BudgetExceeded& e) {
          stopped = true;
          stopped_by = e.why;
        } catch (...) {
          g_.arm_limits(nullptr);
          throw;
        }
        RuleStats& rs = rep.rules[first_rule + r];
        rs.applied += n;
        st.applied += n;
        rs.apply_s += seconds(a, Clock::now());
      }
      g_.arm_limits(nullptr);
      auto t2 = Clock::now();
      st.apply_s = seconds(t1, t2);
      st.rebuild_unions = g_.rebuild();
      auto t3 = Clock::now();
      st.rebuild_s = seconds(t2, t3);
      st.nodes = g_.num_nodes();
      st.classes = g_.num_classes();
      for (std::size_t r = 0; r < rules.size(); ++r)
        rep.rules[first_rule + r].times_banned = scheduler_->times_banned(r);
      rep.iterations.push_back(st);
      if (hook_) hook_(st);
      if (stopped) {
        rep.stop = stopped_by;
        return rep.stop;
      }
      if (g_.version() == v0 && scheduler_->can_stop(it)) {
        rep.stop = StopReason::Saturated;
        return rep.stop;
      }
    }
  }

  bool limit_hit(std::size_t it, std::size_t iter_limit, StopReason& why) const {
    if (it >= iter_limit) {
      why = StopReason::IterationLimit;
      return true;
    }
    if (g_.num_nodes() > node_limit_) {
      why = StopReason::NodeLimit;
      return true;
    }
    if (seconds(start_, Clock::now()) > time_limit_) {
      why = StopReason::TimeLimit;
      return true;
    }
    if (memory_limit_mb_ < std::numeric_limits<double>::infinity() && current_rss_mb() > memory_limit_mb_) {
      why = StopReason::MemoryLimit;
      return true;
    }
    return false;
  }

  void finish(Report& rep) {
    rep.nodes = g_.num_nodes();
    rep.classes = g_.num_classes();
    for (const auto& it : rep.iterations) {
      rep.search_s += it.search_s;
      rep.apply_s += it.apply_s;
      rep.rebuild_s += it.rebuild_s;
    }
    rep.total_s = seconds(start_, Clock::now());
  }

  Graph& g_;
  std::shared_ptr<Scheduler> scheduler_;
  std::function<void(const IterationStats&)> hook_;
  std::size_t iter_limit_ = 30;
  std::size_t node_limit_ = std::numeric_limits<std::size_t>::max();
  double time_limit_ = std::numeric_limits<double>::infinity();
  double memory_limit_mb_ = std::numeric_limits<double>::infinity();
  bool semi_naive_ = true;
  Clock::time_point start_{};
  Limits limits_;  // armed on the e-graph while applying, checked while searching
  bool started_ = false;
};

}  // namespace luminal::egraph
