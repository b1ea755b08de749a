// Luminal's worker pool (lib/runtime/thread_pool): every iteration of every parallel
// loop runs exactly once, jobs that are not waited for finish by the next barrier, a
// call never has more threads than asked and the pool never starts more than its size.
#include <catch2/catch.hpp>

#include <atomic>
#include <cstring>
#include <fstream>
#include <memory>
#include <sstream>
#include <thread>
#include <vector>

#include "runtime/thread_pool.hpp"

namespace d = luminal::detail;

namespace {

struct Counts {
  std::vector<std::atomic<int>> hits;
  std::atomic<int> max_tid{0};
  explicit Counts(size_t n) : hits(n) {}
};

void count_task(void* env, int64_t lo, int64_t hi, int tid) {
  auto* c = *static_cast<Counts**>(env);
  for (int64_t i = lo; i < hi; ++i) c->hits[static_cast<size_t>(i)].fetch_add(1, std::memory_order_relaxed);
  int m = c->max_tid.load();
  while (tid > m && !c->max_tid.compare_exchange_weak(m, tid)) {
  }
}

bool all_once(const Counts& c) {
  for (const auto& h : c.hits)
    if (h.load() != 1) return false;
  return true;
}

// Threads of this process (from /proc/self/status).
int process_threads() {
  std::ifstream in("/proc/self/status");
  for (std::string line; std::getline(in, line);)
    if (line.rfind("Threads:", 0) == 0) return std::stoi(line.substr(8));
  return -1;
}

}  // namespace

TEST_CASE("pool: every iteration runs once, whatever the chunking and the team", "[cpu][pool]") {
  d::WorkerPool pool(3, 20000);
  for (int threads : {1, 2, 4})
    for (int64_t n : {1, 7, 64, 1000, 4097})
      for (int64_t chunk : {1, 3, 64, 5000})
        for (bool nowait : {false, true}) {
          Counts c(static_cast<size_t>(n));
          Counts* env = &c;
          d::CallTeam team(&pool, threads);
          team.parallel_for(n, chunk, count_task, &env, sizeof env, nowait);
          team.finish();
          INFO("threads " << threads << " n " << n << " chunk " << chunk << " nowait " << nowait);
          CHECK(all_once(c));
          CHECK(c.max_tid.load() < threads);
        }
}

TEST_CASE("pool: jobs not waited for are complete at the barrier, beyond the slot ring", "[cpu][pool]") {
  // 40 independent jobs in a row without a wait (more than the 8 slots a team cycles
  // through), each with its arguments on a stack frame that is gone when it runs.
  d::WorkerPool pool(2, 20000);
  constexpr int kJobs = 40;
  std::vector<std::unique_ptr<Counts>> counts;
  for (int j = 0; j < kJobs; ++j) counts.push_back(std::make_unique<Counts>(static_cast<size_t>(500 + j)));
  for (int rep = 0; rep < 20; ++rep) {
    for (auto& c : counts)
      for (auto& h : c->hits) h.store(0);
    d::CallTeam team(&pool, 3);
    for (int j = 0; j < kJobs; ++j) {
      Counts* env = counts[static_cast<size_t>(j)].get();  // copied into the job: this frame ends
      team.parallel_for(static_cast<int64_t>(env->hits.size()), 7, count_task, &env, sizeof env, true);
    }
    team.barrier();
    for (auto& c : counts) REQUIRE(all_once(*c));
  }
}

TEST_CASE("pool: threads are created once, never more than the pool's size", "[cpu][pool]") {
  const int before = process_threads();
  d::WorkerPool pool(2, 20000);
  {
    d::CallTeam one(&pool, 1);  // a one-thread call never starts the pool
    Counts c(100);
    Counts* env = &c;
    one.parallel_for(100, 1, count_task, &env, sizeof env, false);
    CHECK(all_once(c));
  }
  CHECK(pool.threads_started() == 0);
  CHECK(process_threads() == before);
  // Eight callers at once, each asking for 4 threads, 200 calls each: every call gets
  // what is idle (possibly nobody), the pool stays at 2 threads.
  std::atomic<int> bad{0};
  std::vector<std::thread> callers;
  for (int t = 0; t < 8; ++t)
    callers.emplace_back([&] {
      for (int i = 0; i < 200; ++i) {
        Counts c(300);
        Counts* env = &c;
        d::CallTeam team(&pool, 4);
        const int got = team.threads();
        if (got < 1 || got > 3) ++bad;
        team.parallel_for(300, 10, count_task, &env, sizeof env, i % 2 == 0);
        team.finish();
        if (!all_once(c) || c.max_tid.load() >= got) ++bad;
      }
    });
  const int during = process_threads();
  for (auto& th : callers) th.join();
  CHECK(bad.load() == 0);
  CHECK(pool.threads_started() == 2);
  CHECK(during <= before + 8 + 2);  // callers + the pool, nothing else
  CHECK(process_threads() == before + 2);
}

TEST_CASE("pool: a loop issued from inside a task runs inline on that thread", "[cpu][pool]") {
  d::WorkerPool pool(1, 20000);
  struct Env {
    d::CallTeam* team;
    Counts* inner;
    std::atomic<int> wrong{0};  // Catch2 assertions are not thread-safe: counted here
  };
  Counts inner(64 * 50);
  d::CallTeam team(&pool, 2);
  Env e{&team, &inner};
  auto outer = [](void* env, int64_t lo, int64_t hi, int tid) {
    auto* x = static_cast<Env*>(env);
    if (x->team->threads() != 1) ++x->wrong;  // inside a task
    for (int64_t i = lo; i < hi; ++i) {
      struct Slice {
        Env* x;
        int64_t base;
        int tid;
      } s{x, i * 64, tid};
      x->team->parallel_for(
          64, 8,
          [](void* se, int64_t a, int64_t b, int t) {
            auto* sl = static_cast<Slice*>(se);
            if (t != sl->tid) ++sl->x->wrong;
            for (int64_t k = a; k < b; ++k)
              sl->x->inner->hits[static_cast<size_t>(sl->base + k)].fetch_add(1);
          },
          &s, sizeof s, false);
    }
  };
  team.parallel_for(50, 5, outer, &e, sizeof e, false);
  team.finish();
  CHECK(e.wrong.load() == 0);
  CHECK(all_once(inner));
}

TEST_CASE("pool: a sleeping worker is woken and takes part", "[cpu][pool]") {
  // Two chunks, each waiting (up to 5 s) until both are running: they can only both run
  // if a worker joined the caller. The worker has slept since the pool started (its poll
  // is 20 us), so this also checks the wake-up.
  d::WorkerPool pool(1, 20000);
  for (int rep = 0; rep < 3; ++rep) {
    {
      d::CallTeam warm(&pool, 2);
      warm.threads();  // starts the pool; the worker then goes back to sleep
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    struct Env {
      std::atomic<int> running{0};
      std::atomic<int> met{0};
    } e;
    d::CallTeam team(&pool, 2);
    REQUIRE(team.threads() == 2);
    team.parallel_for(
        2, 1,
        [](void* env, int64_t, int64_t, int) {
          auto* x = static_cast<Env*>(env);
          x->running.fetch_add(1);
          const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(5);
          while (x->running.load() < 2 && std::chrono::steady_clock::now() < until) std::this_thread::yield();
          if (x->running.load() == 2) x->met.fetch_add(1);
        },
        &e, sizeof e, false);
    CHECK(e.met.load() == 2);
  }
}
