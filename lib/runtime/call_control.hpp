// A call's limits as the executables see them: its thread count (0: the executable's
// default), its deadline and its cancel token (CallOptions, luminal/serving.hpp).
#pragma once

#include <chrono>
#include <string>

#include "luminal/error.hpp"
#include "luminal/serving.hpp"

namespace luminal::detail {

struct CallControl {
  int threads = 0;
  std::chrono::steady_clock::time_point deadline = std::chrono::steady_clock::time_point::max();
  const CancelToken* cancel = nullptr;

  CallControl() = default;
  explicit CallControl(const CallOptions& o) : threads(o.threads), deadline(o.deadline), cancel(o.cancel) {}

  /// Whether the call may have to stop (checking costs a clock read only then).
  bool can_stop() const { return cancel || deadline != std::chrono::steady_clock::time_point::max(); }
  /// Throws CancelledError / DeadlineExceededError when the call must stop; `where`
  /// describes the point reached ("before kernel 3 of 24").
  void check(const std::string& where) const {
    if (cancel && cancel->cancelled())
      throw CancelledError("[call] cancelled " + where + "; the Callable is unaffected");
    if (deadline != std::chrono::steady_clock::time_point::max() &&
        std::chrono::steady_clock::now() >= deadline)
      throw DeadlineExceededError("[call] deadline exceeded " + where + "; the Callable is unaffected");
  }
  /// check() only when the call can stop, without building the text otherwise.
  template <class Where>
  void check_lazy(Where&& where) const {
    if (!can_stop()) return;
    if ((cancel && cancel->cancelled()) || (deadline != std::chrono::steady_clock::time_point::max() &&
                                            std::chrono::steady_clock::now() >= deadline))
      check(where());
  }
};

}  // namespace luminal::detail
