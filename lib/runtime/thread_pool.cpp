// Worker pool and call teams (see the header for the design).
//
// Protocol, in one place:
//  * TeamState::published counts the jobs of the call (bit kClosed: the call is over).
//    Job s lives in slot s % kRing; the caller writes the slot, then stores its seq
//    (release), then bumps published (seq_cst) and wakes sleepers.
//  * A member enters slot s by incrementing its `users` and then reading its `seq`
//    (both seq_cst); only when seq == s does it read the fields and claim chunks. Before
//    rewriting a slot, the caller waits until the old job is complete, stores seq =
//    kNoJob and waits for users == 0 (seq_cst): a member either saw the old seq and is
//    counted in users, or sees kNoJob and leaves the slot alone.
//  * Each member adds the chunks it ran to `done` (acq_rel) of the slot once it finds none
//    left; the caller reads it with acquire, so everything a chunk wrote is visible once
//    the job counts as complete.
//  * Sleeping: a waiter announces itself (sleepers / caller_waiting / sleeping, seq_cst),
//    re-reads the futex word and sleeps only if it is unchanged; a waker changes the word
//    first (seq_cst) and then checks the announcement. One of the two sees the other.
#include "runtime/thread_pool.hpp"

#include <linux/futex.h>
#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <climits>
#include <cstring>

namespace luminal::detail {

namespace {

constexpr uint32_t kClosed = 0x80000000u;
constexpr uint32_t kNoJob = 0xffffffffu;
constexpr uint32_t kRing = 8;

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield" ::: "memory");
#endif
}

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

uint32_t* futex_addr(std::atomic<uint32_t>* a) { return reinterpret_cast<uint32_t*>(a); }
static_assert(sizeof(std::atomic<uint32_t>) == sizeof(uint32_t));

void futex_wait(std::atomic<uint32_t>* a, uint32_t expected) {
  ::syscall(SYS_futex, futex_addr(a), FUTEX_WAIT_PRIVATE, expected, nullptr, nullptr, 0);
}
// Returns false when the wait timed out.
bool futex_wait_for(std::atomic<uint32_t>* a, uint32_t expected, int64_t ns) {
  timespec ts{static_cast<time_t>(ns / 1000000000), static_cast<long>(ns % 1000000000)};
  return ::syscall(SYS_futex, futex_addr(a), FUTEX_WAIT_PRIVATE, expected, &ts, nullptr, 0) == 0 ||
         errno != ETIMEDOUT;
}

std::atomic<void (*)()> g_idle_hook{nullptr};
void futex_wake(std::atomic<uint32_t>* a, int n) {
  ::syscall(SYS_futex, futex_addr(a), FUTEX_WAKE_PRIVATE, n, nullptr, nullptr, 0);
}

// Set while a thread runs a chunk: a parallel loop issued from inside one runs inline
// (on that thread, as member t_tid).
thread_local bool t_in_task = false;
thread_local int t_tid = 0;

}  // namespace

struct alignas(64) JobSlot {
  std::atomic<uint32_t> seq{kNoJob};
  std::atomic<int32_t> users{0};
  TaskFn fn = nullptr;
  const void* env = nullptr;  // env_copy, or the caller's memory when the caller waits
  int64_t n = 0, chunk = 1, nchunks = 0;
  alignas(64) std::atomic<int64_t> next{0};
  alignas(64) std::atomic<int64_t> done{0};
  alignas(64) unsigned char env_copy[CallTeam::kEnvBytes];
};

struct TeamState {
  JobSlot jobs[kRing];
  alignas(64) std::atomic<uint32_t> published{0};
  std::atomic<int32_t> sleepers{0};
  alignas(64) std::atomic<uint32_t> completions{0};
  std::atomic<int32_t> caller_waiting{0};
  alignas(64) std::atomic<int32_t> refs{0};

  void reset() {
    for (auto& j : jobs) {
      j.seq.store(kNoJob, std::memory_order_relaxed);
      j.next.store(0, std::memory_order_relaxed);
      j.done.store(0, std::memory_order_relaxed);
    }
    published.store(0, std::memory_order_relaxed);
    caller_waiting.store(0, std::memory_order_relaxed);
    refs.store(1, std::memory_order_relaxed);  // the caller
  }
};

struct PoolWorker {
  std::thread thread;
  alignas(64) std::atomic<TeamState*> team{nullptr};
  std::atomic<int> tid{0};
  std::atomic<uint32_t> wake{0};
  std::atomic<int32_t> sleeping{0};
  std::atomic<bool> stop{false};
};

namespace {

// Claims and runs chunks of `j` until none is left.
void run_chunks(TeamState& t, JobSlot& j, int tid) {
  const int64_t n = j.n, chunk = j.chunk, nchunks = j.nchunks;
  const TaskFn fn = j.fn;
  void* env = const_cast<void*>(j.env);
  const bool was_in_task = t_in_task;
  const int was_tid = t_tid;
  t_in_task = true;
  t_tid = tid;
  // Completions are counted once per member and job, after its last chunk, not per chunk:
  // the caller only needs the total, and every chunk a member claimed is done by the time
  // it finds none left. Per-chunk counting bounced two shared cache lines between the
  // cores for each of a decode step's ~2000 chunks.
  int64_t mine = 0;
  for (;;) {
    const int64_t c = j.next.fetch_add(1, std::memory_order_relaxed);
    if (c >= nchunks) break;
    const int64_t lo = c * chunk;
    fn(env, lo, std::min(n, lo + chunk), tid);
    ++mine;
  }
  if (mine > 0) {
    j.done.fetch_add(mine, std::memory_order_acq_rel);
    if (tid != 0) {  // a member: the caller may be asleep waiting for these chunks
      t.completions.fetch_add(1, std::memory_order_seq_cst);
      if (t.caller_waiting.load(std::memory_order_seq_cst)) futex_wake(&t.completions, 1);
    }
  }
  t_in_task = was_in_task;
  t_tid = was_tid;
}

// Member `tid` takes part in job `s` if the job is still in its slot.
void join_job(TeamState& t, uint32_t s, int tid) {
  JobSlot& j = t.jobs[s % kRing];
  j.users.fetch_add(1, std::memory_order_seq_cst);
  if (j.seq.load(std::memory_order_seq_cst) == s) run_chunks(t, j, tid);
  j.users.fetch_sub(1, std::memory_order_release);
}

// A worker's life inside one call: every job from the one running when it joined, until
// the call is closed; polling `spin_ns` when out of work, then sleeping.
void run_team(TeamState& t, int tid, int64_t spin_ns) {
  uint32_t p = t.published.load(std::memory_order_acquire) & ~kClosed;
  uint32_t s = p > 0 ? p - 1 : 0;
  int64_t idle_since = -1;
  for (;;) {
    p = t.published.load(std::memory_order_acquire);
    if (s < (p & ~kClosed)) {
      join_job(t, s, tid);
      ++s;
      idle_since = -1;
      continue;
    }
    if (p & kClosed) return;
    const int64_t now = now_ns();
    if (idle_since < 0) {
      idle_since = now;
    } else if (now - idle_since > spin_ns) {
      t.sleepers.fetch_add(1, std::memory_order_seq_cst);
      if (t.published.load(std::memory_order_seq_cst) == p) futex_wait(&t.published, p);
      t.sleepers.fetch_sub(1, std::memory_order_relaxed);
      idle_since = -1;
      continue;
    }
    for (int i = 0; i < 16; ++i) cpu_relax();
  }
}

}  // namespace

int available_cpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (::sched_getaffinity(0, sizeof set, &set) == 0) {
    const int n = CPU_COUNT(&set);
    if (n > 0) return n;
  }
  const unsigned h = std::thread::hardware_concurrency();
  return h > 0 ? static_cast<int>(h) : 1;
}

// ------------------------------------------------------------------ WorkerPool
WorkerPool::WorkerPool(int workers, int64_t spin_ns) : capacity_(std::max(0, workers)), spin_ns_(spin_ns) {}

WorkerPool::~WorkerPool() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  for (auto& w : workers_) {
    w->stop.store(true, std::memory_order_seq_cst);
    w->wake.fetch_add(1, std::memory_order_seq_cst);
    futex_wake(&w->wake, 1);
  }
  for (auto& w : workers_) w->thread.join();
}

const std::shared_ptr<WorkerPool>& WorkerPool::shared() {
  // Never destroyed: calls may run during static destruction, and worker threads asleep
  // at exit cost nothing.
  static auto* pool =
      new std::shared_ptr<WorkerPool>(std::make_shared<WorkerPool>(available_cpus() - 1, 50000));
  return *pool;
}

void WorkerPool::set_idle_hook(void (*fn)()) { g_idle_hook.store(fn, std::memory_order_release); }

void WorkerPool::start_locked() {
  if (!workers_.empty() || capacity_ == 0) return;
  workers_.reserve(static_cast<size_t>(capacity_));
  idle_.reserve(static_cast<size_t>(capacity_));
  teams_.reserve(static_cast<size_t>(capacity_));
  free_teams_.reserve(static_cast<size_t>(capacity_));
  for (int i = 0; i < capacity_; ++i) {
    workers_.push_back(std::make_unique<PoolWorker>());
    PoolWorker* w = workers_.back().get();
    w->thread = std::thread([this, w] { worker_main(w); });
    started_.fetch_add(1, std::memory_order_relaxed);
    idle_.push_back(w);
    teams_.push_back(std::make_unique<TeamState>());
    free_teams_.push_back(teams_.back().get());
  }
  // Wait until every worker runs: a thread's start (its stack, TLS, a sanitizer's
  // bookkeeping) then happens inside this first call, never during a later call that
  // promised not to allocate, and the first team is formed of live workers.
  while (running_.load(std::memory_order_acquire) < capacity_) std::this_thread::yield();
}

void WorkerPool::release_team(TeamState* t) {
  if (t->refs.fetch_sub(1, std::memory_order_acq_rel) != 1) return;
  std::lock_guard<std::mutex> lock(mu_);
  free_teams_.push_back(t);
}

TeamState* WorkerPool::form_team(int want, int& members) {
  members = 0;
  std::lock_guard<std::mutex> lock(mu_);
  if (stop_ || want < 1) return nullptr;
  start_locked();
  if (idle_.empty()) return nullptr;
  // A caller drops its reference before its workers can leave (CallTeam::finish), so a
  // team is free again by the time its last worker is idle: `capacity` teams (made at
  // start) are enough and forming one does not allocate. Kept safe regardless.
  TeamState* t = nullptr;
  if (!free_teams_.empty()) {
    t = free_teams_.back();
    free_teams_.pop_back();
  } else {
    teams_.push_back(std::make_unique<TeamState>());
    t = teams_.back().get();
    free_teams_.reserve(teams_.size());
  }
  t->reset();
  while (members < want && !idle_.empty()) {
    PoolWorker* w = idle_.back();
    idle_.pop_back();
    ++members;
    w->tid.store(members, std::memory_order_relaxed);
    t->refs.fetch_add(1, std::memory_order_relaxed);
    w->team.store(t, std::memory_order_seq_cst);
    w->wake.fetch_add(1, std::memory_order_seq_cst);
    if (w->sleeping.load(std::memory_order_seq_cst)) futex_wake(&w->wake, 1);
  }
  return t;
}

void WorkerPool::worker_main(PoolWorker* w) {
  running_.fetch_add(1, std::memory_order_release);
  for (;;) {
    // Wait for a call: poll, then sleep.
    TeamState* t = nullptr;
    int64_t since = now_ns();
    for (;;) {
      t = w->team.load(std::memory_order_acquire);
      if (t || w->stop.load(std::memory_order_relaxed)) break;
      if (now_ns() - since < spin_ns_) {
        for (int i = 0; i < 16; ++i) cpu_relax();
        continue;
      }
      const uint32_t v = w->wake.load(std::memory_order_seq_cst);
      w->sleeping.store(1, std::memory_order_seq_cst);
      t = w->team.load(std::memory_order_seq_cst);
      if (!t && !w->stop.load(std::memory_order_seq_cst)) {
        void (*hook)() = g_idle_hook.load(std::memory_order_acquire);
        if (!hook)
          futex_wait(&w->wake, v);
        else if (!futex_wait_for(&w->wake, v, 1000000000))
          hook();  // a second asleep: housekeeping
      }
      w->sleeping.store(0, std::memory_order_relaxed);
      since = now_ns();
    }
    if (!t) return;  // stopping
    run_team(*t, w->tid.load(std::memory_order_relaxed), spin_ns_);
    w->team.store(nullptr, std::memory_order_relaxed);
    release_team(t);
    std::lock_guard<std::mutex> lock(mu_);
    idle_.push_back(w);
  }
}

// ------------------------------------------------------------------ CallTeam
int CallTeam::threads() {
  if (t_in_task) return 1;
  if (threads_) return threads_;
  threads_ = 1;
  if (pool_ && max_threads_ > 1 && pool_->capacity() > 0) {
    int k = 0;
    team_ = pool_->form_team(max_threads_ - 1, k);
    threads_ = 1 + k;
  }
  return threads_;
}

void CallTeam::parallel_for(int64_t n, int64_t chunk, TaskFn fn, const void* env, size_t env_bytes,
                            bool nowait) {
  if (n <= 0) return;
  if (chunk < 1) chunk = 1;
  const int64_t nchunks = (n - 1) / chunk + 1;
  if (t_in_task || nchunks == 1 || threads() == 1) {
    const bool was = t_in_task;
    t_in_task = true;
    fn(const_cast<void*>(env), 0, n, was ? t_tid : 0);
    t_in_task = was;
    return;
  }
  const uint32_t s = published_;
  JobSlot& j = team_->jobs[s % kRing];
  if (s >= kRing) {
    if (s - kRing >= complete_) wait_job(s - kRing);
    j.seq.store(kNoJob, std::memory_order_seq_cst);
    for (int spins = 0; j.users.load(std::memory_order_seq_cst) != 0; ++spins)
      if (spins < 1000)
        cpu_relax();
      else
        ::sched_yield();
  }
  j.fn = fn;
  j.n = n;
  j.chunk = chunk;
  j.nchunks = nchunks;
  if (nowait && env_bytes <= kEnvBytes) {
    std::memcpy(j.env_copy, env, env_bytes);
    j.env = j.env_copy;
  } else {
    j.env = env;
    nowait = false;
  }
  j.next.store(0, std::memory_order_relaxed);
  j.done.store(0, std::memory_order_relaxed);
  j.seq.store(s, std::memory_order_release);
  published_ = s + 1;
  team_->published.store(published_, std::memory_order_seq_cst);
  if (team_->sleepers.load(std::memory_order_seq_cst) > 0) futex_wake(&team_->published, INT_MAX);
  run_chunks(*team_, j, 0);
  if (!nowait) {
    wait_job(s);
    if (complete_ == s) complete_ = s + 1;
  }
}

void CallTeam::wait_job(uint32_t s) {
  JobSlot& j = team_->jobs[s % kRing];
  run_chunks(*team_, j, 0);  // help with what is left
  const int64_t nchunks = j.nchunks;
  if (j.done.load(std::memory_order_acquire) >= nchunks) return;
  const int64_t t0 = now_ns(), spin = pool_ ? pool_->spin_ns() : 0;
  while (now_ns() - t0 < spin) {
    for (int i = 0; i < 16; ++i) cpu_relax();
    if (j.done.load(std::memory_order_acquire) >= nchunks) return;
  }
  // Sleep until a member completes a chunk: the core is free for a preempted member.
  for (;;) {
    team_->caller_waiting.store(1, std::memory_order_seq_cst);
    const uint32_t c = team_->completions.load(std::memory_order_seq_cst);
    if (j.done.load(std::memory_order_acquire) >= nchunks) break;
    futex_wait(&team_->completions, c);
  }
  team_->caller_waiting.store(0, std::memory_order_relaxed);
}

void CallTeam::barrier() {
  if (!team_) return;
  uint32_t from = complete_;
  if (published_ > kRing) from = std::max(from, published_ - kRing);  // older ones were waited for
  for (uint32_t s = from; s < published_; ++s) wait_job(s);
  complete_ = published_;
}

void CallTeam::finish() {
  if (team_) {
    barrier();
    // The caller's reference goes first: the workers (who cannot leave before `closed`)
    // then hold the last ones, so the team is free again before any of them is idle. The
    // team's memory is never freed, so the wake below is safe even if it is reused.
    TeamState* t = team_;
    team_ = nullptr;
    pool_->release_team(t);
    t->published.store(published_ | kClosed, std::memory_order_seq_cst);
    if (t->sleepers.load(std::memory_order_seq_cst) > 0) futex_wake(&t->published, INT_MAX);
  }
  threads_ = 0;
  published_ = complete_ = 0;
}

}  // namespace luminal::detail
