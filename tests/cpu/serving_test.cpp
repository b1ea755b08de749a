// Serving on the CPU target (docs/serving.md): threads per Callable and per call with no
// more threads than the pool plus the callers, weights swapped while other threads call,
// deadlines and cancellation between kernels, bounded scratch memory, and compiled code
// unloaded with its last Callable.
#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "backends/cpu/cpu_executable.hpp"
#include "compiler/translation_models.hpp"
#include "luminal/luminal.hpp"
#include "runtime/executable.hpp"

namespace lm = luminal;
using lm::Tensor;
using namespace std::chrono_literals;

namespace {

int process_threads() {
  std::ifstream in("/proc/self/status");
  for (std::string line; std::getline(in, line);)
    if (line.rfind("Threads:", 0) == 0) return std::stoi(line.substr(8));
  return -1;
}

std::string self_maps() {
  std::ifstream in("/proc/self/maps");
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// y = x @ w + b over [rows, 64] x [64, 64]: GEMMs large enough to run on the team.
lm::Graph linear_graph(int64_t rows) {
  lm::Graph g;
  Tensor x = g.input("x", {rows, 64});
  g.output("y", lm::matmul(x, g.param("w", {64, 64})) + g.param("b", {64}));
  return g;
}

std::vector<float> filled(size_t n, float scale, float offset) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = offset + scale * static_cast<float>((i * 7919) % 101) / 101.f;
  return v;
}

// The exact values of x @ w + b in the order the generated code sums them is not known,
// so results are compared with a double-precision reference within float rounding.
std::vector<double> linear_ref(const std::vector<float>& x, const std::vector<float>& w,
                               const std::vector<float>& b, int64_t rows) {
  std::vector<double> y(static_cast<size_t>(rows) * 64);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < 64; ++c) {
      double s = b[static_cast<size_t>(c)];
      for (int64_t k = 0; k < 64; ++k)
        s += double(x[static_cast<size_t>(r * 64 + k)]) * double(w[static_cast<size_t>(k * 64 + c)]);
      y[static_cast<size_t>(r * 64 + c)] = s;
    }
  return y;
}

bool close_to(std::span<const float> got, const std::vector<double>& want) {
  if (got.size() != want.size()) return false;
  for (size_t i = 0; i < want.size(); ++i)
    if (std::abs(got[i] - want[i]) > 1e-4 * (1 + std::abs(want[i]))) return false;
  return true;
}

}  // namespace

TEST_CASE("serving: threads per Callable and per call, never more than the pool", "[cpu][serving]") {
  auto pool = std::make_shared<lm::ThreadPool>(lm::ThreadPoolOptions{2, 50});
  CHECK(pool->workers() == 2);
  CHECK(pool->threads_started() == 0);
  lm::Graph g = linear_graph(256);
  lm::CompileOptions o;
  o.thread_pool = pool;
  o.threads = 1;
  lm::Callable f = lm::compile(g, lm::Target::cpu(), o);
  const auto x = filled(256 * 64, 2.f, -1.f), w = filled(64 * 64, 0.2f, -0.1f), b = filled(64, 1.f, 0.f);
  f.bind("w", lm::HostTensor::from(w, {64, 64}));
  f.bind("b", lm::HostTensor::from(b, {64}));
  const auto want = linear_ref(x, w, b, 256);
  std::map<std::string, lm::HostTensor> in{{"x", lm::HostTensor::from(x, {256, 64})}}, out;
  // One thread per call (the Callable's setting): the pool is never started, even with
  // OMP_NUM_THREADS saying otherwise (it means nothing to Luminal).
  ::setenv("OMP_NUM_THREADS", "8", 1);
  for (int i = 0; i < 5; ++i) REQUIRE(f.run(in, out));
  CHECK(close_to(out.at("y").values<float>(), want));
  CHECK(pool->threads_started() == 0);
  // A call asking for 3 threads starts the pool's 2 workers, and no more ever.
  lm::CallOptions three;
  three.threads = 3;
  for (int i = 0; i < 5; ++i) REQUIRE(f.run(in, out, three));
  CHECK(close_to(out.at("y").values<float>(), want));
  CHECK(pool->threads_started() == 2);
  lm::CallOptions many;
  many.threads = 64;
  REQUIRE(f.run(in, out, many));
  CHECK(pool->threads_started() == 2);
  ::unsetenv("OMP_NUM_THREADS");
}

TEST_CASE("serving: 8 request threads on one Callable: right answers, no oversubscription",
          "[cpu][serving]") {
  const int before = process_threads();
  auto pool = std::make_shared<lm::ThreadPool>(lm::ThreadPoolOptions{2, 50});
  lm::Graph g = linear_graph(128);
  for (int threads : {1, 0}) {  // one thread per call; then all the pool has
    lm::CompileOptions o;
    o.thread_pool = pool;
    o.threads = threads;
    lm::Callable f = lm::compile(g, lm::Target::cpu(), o);
    const auto w = filled(64 * 64, 0.2f, -0.1f), b = filled(64, 1.f, 0.f);
    f.bind("w", lm::HostTensor::from(w, {64, 64}));
    f.bind("b", lm::HostTensor::from(b, {64}));
    std::atomic<int> bad{0}, most{0};
    std::vector<std::thread> callers;
    for (int t = 0; t < 8; ++t)
      callers.emplace_back([&, t] {
        const auto x = filled(128 * 64, 1.f + static_cast<float>(t), -0.5f);
        const auto want = linear_ref(x, w, b, 128);
        std::map<std::string, lm::HostTensor> in{{"x", lm::HostTensor::from(x, {128, 64})}}, out;
        for (int i = 0; i < 50; ++i) {
          if (!f.run(in, out) || !close_to(out.at("y").values<float>(), want)) ++bad;
          const int n = process_threads();
          int m = most.load();
          while (n > m && !most.compare_exchange_weak(m, n)) {
          }
        }
      });
    for (auto& c : callers) c.join();
    INFO("threads per call " << threads);
    CHECK(bad.load() == 0);
    // the 8 callers and at most the pool's 2 workers
    CHECK(most.load() <= before + 8 + 2);
    CHECK(pool->threads_started() == (threads == 1 ? 0 : 2));
  }
}

TEST_CASE("serving: bind() while other threads call: each call sees one set of weights", "[cpu][serving]") {
  lm::Graph g = linear_graph(32);
  lm::Callable f = lm::compile(g, lm::Target::cpu());
  const auto x = filled(32 * 64, 1.f, -0.5f);
  const auto w1 = filled(64 * 64, 0.2f, -0.1f), b1 = filled(64, 1.f, 0.f);
  const auto w2 = filled(64 * 64, -0.3f, 0.2f), b2 = filled(64, -2.f, 1.f);
  const auto want1 = linear_ref(x, w1, b1, 32), want2 = linear_ref(x, w2, b2, 32);
  const lm::HostTensor tw1 = lm::HostTensor::from(w1, {64, 64}), tb1 = lm::HostTensor::from(b1, {64});
  const lm::HostTensor tw2 = lm::HostTensor::from(w2, {64, 64}), tb2 = lm::HostTensor::from(b2, {64});
  f.bind({{"w", tw1}, {"b", tb1}});
  std::atomic<bool> stop{false};
  std::atomic<int> mixed{0}, saw1{0}, saw2{0};
  std::vector<std::thread> callers;
  for (int t = 0; t < 3; ++t)
    callers.emplace_back([&] {
      std::map<std::string, lm::HostTensor> in{{"x", lm::HostTensor::from(x, {32, 64})}}, out;
      while (!stop.load()) {
        if (!f.run(in, out)) {
          ++mixed;
          continue;
        }
        const auto y = out.at("y").values<float>();
        if (close_to(y, want1))
          ++saw1;
        else if (close_to(y, want2))
          ++saw2;
        else
          ++mixed;  // w of one set with b of the other, or torn
      }
    });
  std::map<std::string, lm::HostTensor> in{{"x", lm::HostTensor::from(x, {32, 64})}}, out;
  // Swap at least 200 times, and until the other threads have seen each set a few times
  // (on two cores they may run in long bursts while this thread waits).
  const auto until = std::chrono::steady_clock::now() + 20s;
  for (int i = 0;
       i < 200 || ((saw1.load() < 10 || saw2.load() < 10) && std::chrono::steady_clock::now() < until); ++i) {
    const bool second = i % 2 == 0;
    f.bind({{"w", second ? tw2 : tw1}, {"b", second ? tb2 : tb1}});
    // the next call after bind() returns sees the new weights
    REQUIRE(f.run(in, out));
    CHECK(close_to(out.at("y").values<float>(), second ? want2 : want1));
  }
  stop = true;
  for (auto& c : callers) c.join();
  INFO("calls seeing the first set " << saw1.load() << ", the second " << saw2.load() << ", neither "
                                     << mixed.load());
  CHECK(mixed.load() == 0);
  CHECK(saw1.load() > 0);
  CHECK(saw2.load() > 0);
}

TEST_CASE("serving: deadlines and cancellation stop a call between kernels", "[cpu][serving]") {
  lm::Graph g;
  lm::test::BlockConfig c{64, 128, 4, 2, 192};
  lm::test::build_model(g, c, 2);  // two decoder layers: a few dozen kernels
  auto all = lm::test::random_inputs(*g.impl(), 3);
  lm::Callable f = lm::compile(g, lm::Target::cpu());
  for (const auto& p : f.param_names()) f.bind(p, all.at(p));
  std::map<std::string, lm::HostTensor> in, out;
  for (const auto& n : f.input_names()) in.emplace(n, all.at(n));
  REQUIRE(f.run(in, out));
  const std::vector<float> want = out.at("y").to_f32();
  auto still_right = [&] {
    std::map<std::string, lm::HostTensor> again;
    REQUIRE(f.run(in, again));
    CHECK(again.at("y").to_f32() == want);
  };

  // A deadline already passed: the call does not start.
  lm::Status s = f.run(in, out, lm::CallOptions::within(-1ms));
  CHECK_FALSE(s.ok);
  CHECK(s.code == lm::StatusCode::deadline_exceeded);
  CHECK_THAT(s.message, Catch::Contains("deadline exceeded before it started"));
  still_right();
  // A deadline that passes during the call: it stops before a later kernel.
  bool stopped_inside = false;
  for (int rep = 0; rep < 20 && !stopped_inside; ++rep) {
    s = f.run(in, out, lm::CallOptions::within(std::chrono::microseconds(50 + 100 * rep)));
    if (s.ok) continue;
    CHECK(s.code == lm::StatusCode::deadline_exceeded);
    stopped_inside = s.message.find("before kernel") != std::string::npos;
  }
  CHECK(stopped_inside);
  still_right();
  // The throwing call says the same with its own error type.
  CHECK_THROWS_AS(f(in, lm::CallOptions::within(-1ms)), lm::DeadlineExceededError);

  // Cancelled before the call: stops at once; reset, the token serves again.
  lm::CancelToken token;
  lm::CallOptions with_token;
  with_token.cancel = &token;
  token.cancel();
  s = f.run(in, out, with_token);
  CHECK(s.code == lm::StatusCode::cancelled);
  CHECK_THROWS_AS(f(in, with_token), lm::CancelledError);
  token.reset();
  REQUIRE(f.run(in, out, with_token));
  CHECK(out.at("y").to_f32() == want);
  // Cancelled from another thread while calls run: the running or next call stops.
  std::atomic<int> cancelled{0}, completed{0};
  std::thread worker([&] {
    std::map<std::string, lm::HostTensor> o;
    for (int i = 0; i < 100000 && cancelled.load() == 0; ++i) {
      const lm::Status st = f.run(in, o, with_token);
      if (st.code == lm::StatusCode::cancelled) ++cancelled;
      if (st.ok) ++completed;
    }
  });
  std::this_thread::sleep_for(20ms);
  token.cancel();
  worker.join();
  CHECK(cancelled.load() == 1);
  token.reset();
  still_right();
}

TEST_CASE("serving: scratch memory under a cap, freed when idle", "[cpu][serving]") {
  lm::Graph g = linear_graph(512);
  // How much one call needs: from an uncapped Callable.
  int64_t one = 0;
  {
    lm::Callable probe = lm::compile(g, lm::Target::cpu());
    probe.bind("w", lm::HostTensor(lm::f32, {64, 64}));
    probe.bind("b", lm::HostTensor(lm::f32, {64}));
    std::map<std::string, lm::HostTensor> in{{"x", lm::HostTensor(lm::f32, {512, 64})}}, out;
    REQUIRE(probe.run(in, out));
    one = probe.memory_held();
    REQUIRE(one > 0);
    probe.trim_memory();
    CHECK(probe.memory_held() == 0);
  }
  lm::CompileOptions o;
  o.max_arena_bytes = one + one / 2;  // room for one call at a time
  o.arena_idle_seconds = 0.05;
  lm::Callable f = lm::compile(g, lm::Target::cpu(), o);
  const auto x = filled(512 * 64, 1.f, -0.5f), w = filled(64 * 64, 0.2f, -0.1f), b = filled(64, 1.f, 0.f);
  f.bind("w", lm::HostTensor::from(w, {64, 64}));
  f.bind("b", lm::HostTensor::from(b, {64}));
  const auto want = linear_ref(x, w, b, 512);
  std::atomic<int> bad{0};
  std::atomic<int64_t> most{0};
  std::vector<std::thread> callers;
  for (int t = 0; t < 4; ++t)
    callers.emplace_back([&] {
      std::map<std::string, lm::HostTensor> in{{"x", lm::HostTensor::from(x, {512, 64})}}, out;
      for (int i = 0; i < 30; ++i) {
        if (!f.run(in, out) || !close_to(out.at("y").values<float>(), want)) ++bad;
        const int64_t held = f.memory_held();
        int64_t m = most.load();
        while (held > m && !most.compare_exchange_weak(m, held)) {
        }
      }
    });
  for (auto& c : callers) c.join();
  CHECK(bad.load() == 0);
  CHECK(most.load() <= o.max_arena_bytes);
  CHECK(f.memory_held() > 0);
  // Idle: freed without another call (by the pool's sleeping workers), within seconds.
  const auto until = std::chrono::steady_clock::now() + 5s;
  while (f.memory_held() > 0 && std::chrono::steady_clock::now() < until) std::this_thread::sleep_for(20ms);
  CHECK(f.memory_held() == 0);
  // A call that alone needs more than the cap is refused with a clear error.
  lm::CompileOptions tiny;
  tiny.max_arena_bytes = 1024;
  lm::Callable h = lm::compile(g, lm::Target::cpu(), tiny);
  h.bind("w", lm::HostTensor::from(w, {64, 64}));
  h.bind("b", lm::HostTensor::from(b, {64}));
  std::map<std::string, lm::HostTensor> in{{"x", lm::HostTensor::from(x, {512, 64})}}, out;
  const lm::Status s = h.run(in, out);
  CHECK_FALSE(s.ok);
  CHECK_THAT(s.message, Catch::Contains("max_arena_bytes"));
}

TEST_CASE("serving: compiled code is unloaded with its last Callable, also after load()", "[cpu][serving]") {
  // A program no other test compiles (its constant), so its library is its own.
  lm::Graph g;
  Tensor x = g.input("x", {256, 64});
  g.output("y", lm::matmul(x, g.param("w", {64, 64})) * 0.123456f);
  std::string path;
  {
    lm::Callable f = lm::compile(g, lm::Target::cpu());
    f.bind("w", lm::HostTensor(lm::f32, {64, 64}));
    std::map<std::string, lm::HostTensor> in{{"x", lm::HostTensor(lm::f32, {256, 64})}}, out;
    REQUIRE(f.run(in, out));
    path = dynamic_cast<const lm::cpu::CpuExecutable&>(*f.state()->exe).library_path();
    REQUIRE_FALSE(path.empty());
    CHECK(self_maps().find(path) != std::string::npos);
    // saved, loaded, called on every thread, dropped: no worker may be left in its code
    const std::string saved =
        (std::filesystem::temp_directory_path() / "luminal-serving-unload.lmp").string();
    f.save(saved);
    for (int i = 0; i < 20; ++i) {
      lm::Callable l = lm::load(saved);
      std::map<std::string, lm::HostTensor> o;
      REQUIRE(l.run(in, o));
    }
    std::filesystem::remove(saved);
  }
  CHECK(self_maps().find(path) == std::string::npos);
}
