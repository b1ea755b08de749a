// Luminal's own worker pool (the library uses no OpenMP).
//
// A call borrows workers for its whole duration: the calling thread is thread 0 and up
// to `threads - 1` idle workers of the pool join it (a call never waits for a worker: a
// busy pool just gives it fewer). Kernels hand the team parallel loops as jobs: a job is
// cut into chunks that every member, the caller included, claims from one atomic counter
// until none is left, so a member that is late, asleep or descheduled simply does fewer
// chunks. Between the jobs of a call the workers stay on it, polling; the caller waits
// for a job's last chunk only when something depends on it (CallTeam::barrier, called by
// the executable before a kernel that touches memory an unfinished job uses, and at the
// end of the call) -- not after every kernel.
//
// Waiting is bounded spinning, then sleeping: a worker polls for `spin` (tunable) after
// its last job or call, then sleeps on a futex; a caller waiting for chunks polls as long,
// then sleeps until a chunk completes. A sleeping thread frees its core, which on a busy
// machine lets the scheduler move a preempted team member there (spinning would keep the
// core and the member would wait for a time slice: libgomp's default 300k-iteration spin
// made a decode step 20x slower beside two builds).
//
// Memory and lifetimes: a job's arguments are copied into its slot when the caller does
// not wait for it, so the kernel that issued it may return. Every job of a call is
// complete when the call's CallTeam finishes, so no worker is inside generated code once
// the call returns, and a library can be unloaded after its last call.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

namespace luminal::detail {

/// A chunk of a parallel loop: iterations [lo, hi), run by team member `tid`.
using TaskFn = void (*)(void* env, int64_t lo, int64_t hi, int tid);

/// CPUs this process may run on (its affinity mask), at least 1.
int available_cpus();

struct TeamState;
struct PoolWorker;

class WorkerPool {
 public:
  /// `workers` threads at most (created together, the first time a call asks for one);
  /// idle members poll for `spin_ns` before they sleep.
  WorkerPool(int workers, int64_t spin_ns);
  ~WorkerPool();
  WorkerPool(const WorkerPool&) = delete;
  WorkerPool& operator=(const WorkerPool&) = delete;

  int capacity() const { return capacity_; }
  int64_t spin_ns() const { return spin_ns_; }
  /// Worker threads created so far (0 or capacity()).
  int threads_started() const { return started_.load(std::memory_order_relaxed); }

  /// The process-wide pool: available_cpus() - 1 workers, 50 us polling. Never destroyed.
  static const std::shared_ptr<WorkerPool>& shared();
  /// A function sleeping workers call about once a second (the CPU backend frees idle
  /// scratch memory there).
  static void set_idle_hook(void (*fn)());

  // For CallTeam.
  /// A team of up to `want` idle workers (members 1, 2, ...; their number in `members`),
  /// or null when none is idle. The caller holds one reference.
  TeamState* form_team(int want, int& members);
  /// Drops one reference; the last one returns the team to the pool.
  void release_team(TeamState* t);

 private:
  void start_locked();
  void worker_main(PoolWorker* w);

  const int capacity_;
  const int64_t spin_ns_;
  std::atomic<int> started_{0};
  std::atomic<int> running_{0};  // workers that have entered worker_main
  std::mutex mu_;
  bool stop_ = false;
  std::vector<std::unique_ptr<PoolWorker>> workers_;
  std::vector<PoolWorker*> idle_;  // capacity reserved: returning a worker never allocates
  std::vector<std::unique_ptr<TeamState>> teams_;
  std::vector<TeamState*> free_teams_;
};

/// One call's team (see the file comment). Not thread-safe: used by the calling thread
/// only (tasks run by members must not call back into it; nested loops run inline).
class CallTeam {
 public:
  /// `pool` may be null (everything runs on the caller); `max_threads` >= 1 counts the
  /// caller.
  CallTeam(WorkerPool* pool, int max_threads)
      : pool_(pool), max_threads_(max_threads < 1 ? 1 : max_threads) {}
  ~CallTeam() { finish(); }
  CallTeam(const CallTeam&) = delete;
  CallTeam& operator=(const CallTeam&) = delete;

  /// Team size: the caller plus the workers reserved for this call (reserved on the
  /// first use; a busy pool gives fewer). 1 inside a task.
  int threads();
  /// Runs fn(env, lo, hi, tid) over [0, n) in chunks of `chunk` iterations on the team.
  /// `nowait`: return once no chunk is left to claim (the caller copies `env`, at most
  /// kEnvBytes, into the job); otherwise return when every chunk is done.
  void parallel_for(int64_t n, int64_t chunk, TaskFn fn, const void* env, size_t env_bytes, bool nowait);
  /// Returns when every job issued so far is complete (the caller helps).
  void barrier();
  /// barrier(), then the workers go back to the pool.
  void finish();

  static constexpr size_t kEnvBytes = 448;

 private:
  void wait_job(uint32_t seq);
  WorkerPool* pool_;
  int max_threads_;
  int threads_ = 0;  // 0: not yet reserved
  TeamState* team_ = nullptr;
  uint32_t published_ = 0;  // jobs issued
  uint32_t complete_ = 0;   // every job below this one is known complete
};

}  // namespace luminal::detail
