// Limits that hold inside an iteration: while a Runner searches and applies, the e-graph
// itself checks them on every node it creates and every few thousand merges, so no rule --
// however many matches it has, however much work its applier does per match -- can carry
// a run past its node, time or memory budget.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <limits>

#include "luminal/egraph/memory.hpp"

namespace luminal::egraph {

/// Why a run stopped.
enum class StopReason : std::uint8_t { Saturated, IterationLimit, NodeLimit, TimeLimit, MemoryLimit };

/// Printable name of a stop reason.
inline const char* to_string(StopReason r) noexcept {
  switch (r) {
    case StopReason::Saturated:
      return "saturated";
    case StopReason::IterationLimit:
      return "iteration-limit";
    case StopReason::NodeLimit:
      return "node-limit";
    case StopReason::TimeLimit:
      return "time-limit";
    case StopReason::MemoryLimit:
      return "memory-limit";
  }
  return "?";
}

/// Thrown by EGraph::add / merge (while limits are armed) before they change anything,
/// and caught by whoever armed them (the Runner): the e-graph stays consistent, with the
/// merges done so far pending for the next rebuild.
struct BudgetExceeded {
  StopReason why;
};

/// The budgets an armed e-graph enforces.
struct Limits {
  using Clock = std::chrono::steady_clock;
  std::size_t node_limit = std::numeric_limits<std::size_t>::max();  ///< live e-nodes
  Clock::time_point deadline = Clock::time_point::max();
  double memory_limit_mb = std::numeric_limits<double>::infinity();  ///< resident set
  /// The clock (and the resident set, when limited) is read once per this many
  /// operations (nodes created, merges, matches applied): a clock read costs ~20 ns and
  /// an operation at least ~50 ns, so checking costs a few percent at most; but one
  /// operation of a custom applier can take far longer (350 us per match was seen on a
  /// cyclic e-graph, and ASan slows that several times over: 64 operations between two
  /// reads once overshot a 20 ms budget by 43 ms), so checks must come often for a
  /// budget to hold within a few milliseconds.
  std::uint32_t check_every = 16;

  /// The time or memory limit that has been passed, if any (reads the clock).
  bool passed(StopReason& why) const {
    if (deadline != Clock::time_point::max() && Clock::now() >= deadline) {
      why = StopReason::TimeLimit;
      return true;
    }
    if (memory_limit_mb < std::numeric_limits<double>::infinity() && current_rss_mb() > memory_limit_mb) {
      why = StopReason::MemoryLimit;
      return true;
    }
    return false;
  }
};

}  // namespace luminal::egraph
