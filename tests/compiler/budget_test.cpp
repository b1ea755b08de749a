// Budgets hold everywhere: the math phase never passes its node limit (not even by one
// node) and stops within its time limit, whatever the rules do, and a compile ends within
// its time budget. The dangerous inputs are arithmetic chains with constants under
// fast-math: (x * 2) / 2 becomes x = x * 2 * 0.5, a cycle that association and constant
// folding grow without end (it once ran 300 s and 569 MB with a budget of 1 s).
//
// Time is measured as this thread's CPU time: a loaded machine stretches wall time, but a
// run stopped by a wall-clock deadline has spent at most that much CPU, so the bounds
// below hold however busy the machine is.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <random>
#include <string>
#include <vector>

#include "compiler/compile_graph.hpp"
#include "ir/build.hpp"
#include "luminal/egraph/runner.hpp"
#include "luminal/luminal.hpp"
#include "rules/registry.hpp"

namespace {

using namespace luminal;

double thread_cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

// x op k op k ... with constants that cancel (2 and 0.5, 8 and 0.125), identities (1, 0)
// and plain ones: the shapes of (x * 2) / 2 and x * 8 * 0.125, and their neighbours.
Graph random_chain(std::mt19937_64& rng) {
  static const float ks[] = {2.f, 0.5f, 8.f, 0.125f, 3.f, 1.f, 0.f, -1.f, 4.f, 0.25f};
  Graph g;
  const int64_t n = 1 + static_cast<int64_t>(rng() % 4);
  Tensor x = g.input("x", {n}, f32);
  Tensor y = x;
  const int len = 1 + static_cast<int>(rng() % 6);
  for (int i = 0; i < len; ++i) {
    const float k = ks[rng() % 10];
    switch (rng() % 5) {
      case 0:
        y = y * k;
        break;
      case 1:
        y = k != 0 ? y / k : y * k;
        break;
      case 2:
        y = y + k;
        break;
      case 3:
        y = y - k;
        break;
      default:
        y = rng() % 2 ? y * x : y + x;
    }
  }
  g.output("y", y);
  return g;
}

}  // namespace

TEST_CASE("budgets hold inside the math phase on thousands of random chains", "[compiler][budget]") {
  constexpr std::size_t kNodeLimit = 1200;
  constexpr double kTimeLimit = 0.02;
#if defined(__SANITIZE_ADDRESS__)  // (the sanitizer configuration builds ASan and UBSan together)
  constexpr double kInProgressSlack = 2.0;
#else
  constexpr double kInProgressSlack = 0.005;
#endif
  const auto rules = rules::Registry::global().engine_rules({"algebra", "movement", "contraction"}, true);
  std::mt19937_64 rng(0xb0d6e7);
  int saturated = 0, by_nodes = 0, by_time = 0, by_iterations = 0;
  for (int i = 0; i < 2000; ++i) {
    Graph chain = random_chain(rng);
    // One run of the chain: its report, and the CPU time it took.
    auto run_once = [&](ir::EGraph& g) {
      ir::load_graph(g, *chain.impl());
      g.rebuild();
      egraph::Runner<ir::TensorLang, ir::TensorAnalysis> runner(g);
      runner.iter_limit(30)
          .node_limit(kNodeLimit)
          .time_limit(kTimeLimit)
          .scheduler(std::make_shared<egraph::BackoffScheduler>(2000, 3));
      const double cpu0 = thread_cpu_seconds();
      egraph::Report rep = runner.run(rules);
      return std::pair{rep, thread_cpu_seconds() - cpu0};
    };
    ir::EGraph g;
    auto [rep, cpu] = run_once(g);
    INFO("chain " << i << ": " << rep.to_string());
    REQUIRE(rep.nodes <= kNodeLimit);      // the limit holds exactly: a node over it is refused
    REQUIRE(g.num_nodes() <= kNodeLimit);  // ... after the last rebuild too
    // 10% over the limit, plus 5 ms for the iteration in progress (its rebuild and what
    // one clock check does not see) -- far below the minutes a runaway applier took.
    // Sanitizers slow each of the up to 64 operations between two clock checks several
    // times over (up to ~0.35 ms each was seen), and stall now and then (a fresh-clone CI
    // run, 2026-12-02: 64 ms against a 20 ms limit, 56 ms in one iteration's applications,
    // passing on rerun; on a slower machine, two ASan processes side by side: 114 ms, 109
    // ms of it applying 408 rules in one iteration, and 416 ms, 414 ms of it in one
    // iteration's search of 7491 matches that took 0.5 ms the iteration before). Under
    // them timing says nothing finer than this: the run stops within 2 s, two orders of
    // magnitude below the runaway (minutes). Release builds keep the bound.
    //
    // A run over the bound runs again, twice at most, and the best of them is held to it:
    // an overshoot of the code is there every run (a runaway applier, a clock check
    // missing from a loop), a stall of the host is not: a Release run on a fully loaded
    // host (2026-12-05) once went over the 27 ms by a little (this thread's CPU time counts
    // its page faults and cache refills too) and passed on rerun.
    double best = cpu;
    for (int again = 0; again < 2 && best > kTimeLimit * 1.1 + kInProgressSlack; ++again) {
      ir::EGraph retry;
      best = std::min(best, run_once(retry).second);
    }
    INFO("CPU time " << cpu * 1e3 << " ms, best of the reruns " << best * 1e3 << " ms");
    REQUIRE(best <= kTimeLimit * 1.1 + kInProgressSlack);
    switch (rep.stop) {
      case egraph::StopReason::Saturated:
        ++saturated;
        break;
      case egraph::StopReason::NodeLimit:
        ++by_nodes;
        break;
      case egraph::StopReason::TimeLimit:
        ++by_time;
        break;
      case egraph::StopReason::IterationLimit:
        ++by_iterations;
        break;
      case egraph::StopReason::MemoryLimit:
        FAIL("no memory limit was set");
    }
  }
  // The corpus reaches every way a run can end (a test that never hits a limit proves
  // nothing about limits).
  CHECK(saturated > 0);
  CHECK(by_nodes + by_time > 0);
  std::printf("chains: %d saturated, %d node-limit, %d time-limit, %d iteration-limit\n", saturated, by_nodes,
              by_time, by_iterations);
}

TEST_CASE("(x * 2) / 2 and x * 8 * 0.125 compile well within a 1 s budget", "[compiler][budget]") {
  // The bound, 10% over the budget. Under sanitizers (several times slower
  // between two clock checks, and stalling: 1.23 s was seen with two ASan processes side
  // by side) the bound is that the compile ends, far from the minutes it once ran.
#if defined(__SANITIZE_ADDRESS__)
  constexpr double kBound = 3.0;
#else
  constexpr double kBound = 1.1;
#endif
  for (const bool fast_math : {false, true}) {
    for (int which = 0; which < 2; ++which) {
      Graph g;
      Tensor x = g.input("x", {4}, f32);
      g.output("y", which == 0 ? (x * 2.f) / 2.f : x * 8.f * 0.125f);
      CompileOptions o;
      o.time_budget_seconds = 1;
      o.node_limit = 5000;
      o.fast_math = fast_math;
      const double cpu0 = thread_cpu_seconds();
      Callable c = compile(g, Target::reference(), o);
      const double cpu = thread_cpu_seconds() - cpu0;
      INFO((which == 0 ? "(x * 2) / 2" : "x * 8 * 0.125") << (fast_math ? ", fast-math: " : ": ")
                                                           << c.report().to_string());
      CHECK(cpu < kBound);
      // Without fast-math nothing regroups the product: x * 2 * 0.5 is what runs, so
      // 3e38 overflows to inf exactly as written; with fast-math it may become x.
      auto out = c({{"x", HostTensor::from(std::vector<float>{1.5f, -2.f, 3e38f, -0.f}, {4})}});
      auto y = out.at("y").values<float>();
      CHECK(y[0] == 1.5f);
      CHECK(y[1] == -2.f);
      if (!fast_math) {
        CHECK(std::isinf(y[2]));
        CHECK(c.report().stop_reason == "saturated");
      }
    }
  }
}

TEST_CASE("fast math's association and distribution stop at the math phase's share of the e-graph",
          "[compiler][budget]") {
  // Some functions are compositions (cos and sigmoid polynomials, log = log2 * ln 2):
  // under fast math, association, commutation, factoring and distribution grow their
  // polynomials without end. The math phase may grow the e-graph to 16x the program (at
  // least 4096 nodes): past it, fusion would spend the budget on equivalent forms (this
  // program took its whole 10 s and ended with its fusion cut short, its kernels depending
  // on the machine's load). Without fast math the same program saturates far below it.
  Graph g;
  Tensor x = g.input("x", {1024}, f16), y = g.input("y", {1024}, f16), z = g.input("z", {1024});
  Tensor v = exp(sin(x)) * y;
  v = sigmoid(tanh(v));
  g.output("out", (relu(v - 0.5f) * 2.0f + x) * y);
  g.output("cos", cos(z));
  g.output("log", log(z));
  g.output("rsqrt", rsqrt(z));
  for (const bool fast_math : {false, true}) {
    CompileOptions o;
    o.fast_math = fast_math;
    o.time_budget_seconds = 600;  // not the clock: the node share decides
    const compiler::CompiledProgram p = compiler::compile_graph(*g.impl(), Target::reference(), o);
    INFO((fast_math ? "fast math: " : "exact: ") << p.report.to_string());
    std::string math;
    for (const std::string& line : p.phases)
      if (line.rfind("math:", 0) == 0) math = line;
    INFO(math);
    size_t before = 0, after = 0;
    REQUIRE(std::sscanf(math.c_str() + math.find(" iterations, ") + 13, "%zu -> %zu nodes", &before,
                        &after) == 2);
    CHECK(p.report.stop_reason.find("time-limit") == std::string::npos);
    if (fast_math) {
      CHECK(p.report.stop_reason.find("node-limit (math rules)") != std::string::npos);
      CHECK(after <= std::max<size_t>(16 * before, 4096));
    } else {
      CHECK(p.report.stop_reason == "saturated");
      CHECK(after < 4 * before);
    }
  }
}
