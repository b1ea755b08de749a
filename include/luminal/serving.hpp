// Running compiled programs inside a server: threads, per-call options, cancellation.
// (docs/serving.md describes the runtime: the pool, memory bounds, live reload.)
#pragma once

#include <atomic>
#include <chrono>
#include <memory>

namespace luminal {

namespace detail {
class WorkerPool;
}

struct ThreadPoolOptions {
  /// Worker threads; the calling thread of each call always works too. -1: the CPUs this
  /// process may run on (its affinity mask) minus one.
  int workers = -1;
  /// How long an idle thread polls for work before it sleeps. Longer: a call that follows
  /// quickly finds its workers awake; shorter: idle threads leave their cores sooner to
  /// other processes.
  double spin_microseconds = 50;
};

/// Worker threads shared by the calls of any number of Callables. A call borrows up to
/// its thread count minus one idle workers for its whole duration and runs with fewer
/// when the pool is busy, so the threads Luminal runs never exceed the pool's workers
/// plus the callers' own threads. Threads start the first time a call asks for one.
/// Cheap to share (shared_ptr); it lives while any Callable using it does.
class ThreadPool {
 public:
  explicit ThreadPool(ThreadPoolOptions options = {});
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  /// The process-wide pool every Callable uses unless told otherwise: default options.
  static std::shared_ptr<ThreadPool> shared();

  int workers() const;
  /// Worker threads started so far (0 until a call first asks for more than one thread).
  int threads_started() const;

  /// Internal.
  const std::shared_ptr<detail::WorkerPool>& impl() const { return impl_; }

 private:
  explicit ThreadPool(std::shared_ptr<detail::WorkerPool> impl) : impl_(std::move(impl)) {}
  std::shared_ptr<detail::WorkerPool> impl_;
};

/// Cancels calls from another thread: pass it in CallOptions::cancel; cancel() makes a
/// running call stop before its next kernel (and a call not started yet stop at once).
/// The call then reports StatusCode::cancelled (run) or throws CancelledError (operator())
/// and the Callable stays usable. Owned by the caller; must outlive the calls using it.
class CancelToken {
 public:
  void cancel() noexcept { flag_.store(true, std::memory_order_release); }
  bool cancelled() const noexcept { return flag_.load(std::memory_order_acquire); }
  /// Makes the token usable again for new calls.
  void reset() noexcept { flag_.store(false, std::memory_order_release); }

 private:
  std::atomic<bool> flag_{false};
};

/// Per-call settings (Callable::run and operator() overloads).
struct CallOptions {
  using Clock = std::chrono::steady_clock;
  /// Threads of this call, the caller included; 0: the Callable's (CompileOptions::threads).
  /// At most the pool's workers + 1 are used.
  int threads = 0;
  /// The call stops before its next kernel once this time has passed (StatusCode::
  /// deadline_exceeded / DeadlineExceededError); the Callable stays usable.
  Clock::time_point deadline = Clock::time_point::max();
  /// Checked before every kernel; null: none.
  const CancelToken* cancel = nullptr;

  /// Options with a deadline `budget` from now.
  static CallOptions within(Clock::duration budget) {
    CallOptions o;
    o.deadline = Clock::now() + budget;
    return o;
  }
};

}  // namespace luminal
