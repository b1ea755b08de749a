// Issue 13: concurrency. One Callable called from 8 threads x 1000 calls (both call
// forms, two dim bindings, outputs checked), programs compiled in parallel (the same
// graph and different graphs), one saved file loaded in parallel, bind() between calls.
// Run under ThreadSanitizer by CI_TSAN=1 .ci/run (build-tsan): our own synchronization --
// thread pool, arena pool, layout cache, JIT caches, Callable state -- is what TSan checks.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <cmath>
#include <thread>

#include "luminal/luminal.hpp"

namespace lm = luminal;

namespace {

// y = softmax(x @ w + b) over [B, 16] x [16, 8]; the expected values are computed here.
struct Program {
  lm::Graph g;
  Program() {
    lm::Dim B = g.dim("B", 1, 64);
    lm::Tensor x = g.input("x", {B, 16});
    g.output("y", lm::softmax(lm::matmul(x, g.param("w", {16, 8})) + g.param("b", {8}), -1));
  }
};

std::vector<float> expected(const std::vector<float>& x, int64_t B, const std::vector<float>& w,
                            const std::vector<float>& b) {
  std::vector<float> y(static_cast<size_t>(B * 8));
  for (int64_t i = 0; i < B; ++i) {
    double row[8], m = -1e30, s = 0;
    for (int j = 0; j < 8; ++j) {
      double acc = b[static_cast<size_t>(j)];
      for (int k = 0; k < 16; ++k) acc += double(x[static_cast<size_t>(i * 16 + k)]) * w[static_cast<size_t>(k * 8 + j)];
      row[j] = acc;
      m = std::max(m, acc);
    }
    for (double& r : row) s += (r = std::exp(r - m));
    for (int j = 0; j < 8; ++j) y[static_cast<size_t>(i * 8 + j)] = static_cast<float>(row[j] / s);
  }
  return y;
}

std::vector<float> values(size_t n, float scale) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = scale * static_cast<float>(static_cast<int>(i * 7919 % 13) - 6);
  return v;
}

bool near(std::span<const float> got, const std::vector<float>& want) {
  if (got.size() != want.size()) return false;
  for (size_t i = 0; i < got.size(); ++i)
    if (std::fabs(got[i] - want[i]) > 1e-5f) return false;
  return true;
}

}  // namespace

TEST_CASE("8 threads x 1000 calls of one Callable", "[reliability][concurrency]") {
  Program p;
  lm::Callable f = lm::compile(p.g, lm::Target::cpu());
  const auto w = values(128, 0.05f), b = values(8, 0.1f);
  f.bind("w", lm::HostTensor::from(w, {16, 8}));
  f.bind("b", lm::HostTensor::from(b, {8}));
  const auto x3 = values(48, 0.2f), x5 = values(80, 0.3f);
  const auto y3 = expected(x3, 3, w, b), y5 = expected(x5, 5, w, b);
  std::atomic<int> bad{0}, done{0};
  std::vector<std::thread> ts;
  for (int t = 0; t < 8; ++t)
    ts.emplace_back([&, t] {
      std::vector<float> out(40);
      for (int i = 0; i < 1000; ++i) {
        const bool five = (i + t) % 2 == 0;
        if (i % 3 == 0) {
          auto r = f({{"x", lm::HostTensor::from(five ? x5 : x3, {five ? 5 : 3, 16})}});
          if (!near(r.at("y").values<float>(), five ? y5 : y3)) ++bad;
        } else {
          std::map<std::string, lm::HostTensor> o{
              {"y", lm::HostTensor::view(lm::f32, {five ? 5 : 3, 8}, out.data())}};
          const auto& xs = five ? x5 : x3;
          const lm::Status s =
              f.run({{"x", lm::HostTensor::view(lm::f32, {five ? 5 : 3, 16}, static_cast<const void*>(xs.data()))}}, o);
          if (!s.ok || !near(std::span<const float>(out.data(), five ? 40 : 24), five ? y5 : y3)) ++bad;
        }
        ++done;
      }
    });
  for (auto& th : ts) th.join();
  CHECK(done == 8000);
  CHECK(bad == 0);
}

TEST_CASE("programs compiled in parallel", "[reliability][concurrency]") {
  // Four threads compile the same graph, four compile graphs of their own.
  std::vector<std::thread> ts;
  std::atomic<int> bad{0};
  for (int t = 0; t < 8; ++t)
    ts.emplace_back([&, t] {
      try {
        lm::Graph g;
        lm::Tensor x = g.input("x", {32});
        const float k = t < 4 ? 3.0f : static_cast<float>(10 + t) + static_cast<float>(::getpid() % 97) / 128.0f;
        g.output("y", lm::tanh(x) * k + 1.0f);
        lm::Callable f = lm::compile(g, lm::Target::cpu());
        const auto xs = values(32, 0.1f);
        const auto out = f({{"x", lm::HostTensor::from(xs, {32})}});
        const auto y = out.at("y").values<float>();
        for (size_t i = 0; i < xs.size(); ++i)
          if (std::fabs(y[i] - (std::tanh(xs[i]) * k + 1.0f)) > 1e-5f * k) ++bad;
      } catch (const std::exception&) {
        ++bad;
      }
    });
  for (auto& th : ts) th.join();
  CHECK(bad == 0);
}

TEST_CASE("one saved program loaded in parallel", "[reliability][concurrency]") {
  Program p;
  lm::Callable f = lm::compile(p.g, lm::Target::cpu());
  const auto w = values(128, 0.05f), b = values(8, 0.1f);
  f.bind("w", lm::HostTensor::from(w, {16, 8}));
  f.bind("b", lm::HostTensor::from(b, {8}));
  const auto path = std::filesystem::temp_directory_path() / ("luminal-conc-" + std::to_string(::getpid()) + ".lmp");
  f.save(path.string());
  const auto x3 = values(48, 0.2f);
  const auto y3 = expected(x3, 3, w, b);
  std::atomic<int> bad{0};
  std::vector<std::thread> ts;
  for (int t = 0; t < 8; ++t)
    ts.emplace_back([&] {
      for (int i = 0; i < 5; ++i) {
        try {
          lm::Callable h = lm::load(path.string());
          if (!near(h({{"x", lm::HostTensor::from(x3, {3, 16})}}).at("y").values<float>(), y3)) ++bad;
        } catch (const std::exception&) {
          ++bad;
        }
      }
    });
  for (auto& th : ts) th.join();
  std::filesystem::remove(path);
  CHECK(bad == 0);
}
