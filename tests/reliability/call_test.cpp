// Issue 13, items 8 and 10: Callable::run with outputs that alias inputs, and
// compile_only on the CPU target.
#include <catch2/catch.hpp>

#include <filesystem>
#include <numeric>
#include <unistd.h>

#include "backends/cpu/jit.hpp"
#include "luminal/luminal.hpp"

namespace lm = luminal;
namespace fs = std::filesystem;

namespace {
// y = transpose(x) * 2 + 1 over [n, n]: element (i, j) reads element (j, i), so writing
// y over x in place destroys values still to be read.
lm::Callable transpose_program(int64_t n, lm::Target t = lm::Target::cpu()) {
  lm::Graph g;
  lm::Tensor x = g.input("x", {n, n});
  g.output("y", lm::transpose(x, 0, 1) * 2.0f + 1.0f);
  return lm::compile(g, t);
}
}  // namespace

TEST_CASE("an output view over an input's memory gets the right values", "[reliability][alias]") {
  constexpr int64_t n = 64;
  std::vector<float> x(n * n);
  std::iota(x.begin(), x.end(), 0.0f);
  std::vector<float> want(n * n);
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < n; ++j) want[i * n + j] = x[j * n + i] * 2 + 1;
  for (lm::Target t : {lm::Target::cpu(), lm::Target::reference()}) {
    lm::Callable f = transpose_program(n, t);
    SECTION("in place: y over x (" + t.to_string() + ")") {
      std::vector<float> buf = x;
      std::map<std::string, lm::HostTensor> out{{"y", lm::HostTensor::view(lm::f32, {n, n}, buf.data())}};
      const lm::Status s = f.run({{"x", lm::HostTensor::view(lm::f32, {n, n}, static_cast<const void*>(buf.data()))}}, out);
      REQUIRE(s.ok);
      CHECK(buf == want);  // before the fix: rows already overwritten were read back
      CHECK(out.at("y").data() == reinterpret_cast<const std::byte*>(buf.data()));  // still the caller's memory
    }
    SECTION("partial overlap (" + t.to_string() + ")") {
      std::vector<float> buf(2 * n * n);
      std::copy(x.begin(), x.end(), buf.begin() + n * n / 2);
      const float* in = buf.data() + n * n / 2;
      std::map<std::string, lm::HostTensor> out{{"y", lm::HostTensor::view(lm::f32, {n, n}, buf.data())}};
      REQUIRE(f.run({{"x", lm::HostTensor::view(lm::f32, {n, n}, static_cast<const void*>(in))}}, out).ok);
      CHECK(std::vector<float>(buf.begin(), buf.begin() + n * n) == want);
    }
  }
}

TEST_CASE("two outputs sharing memory are refused", "[reliability][alias]") {
  lm::Graph g;
  lm::Tensor x = g.input("x", {8});
  g.output("a", x + 1.0f);
  g.output("b", x * 3.0f);
  lm::Callable f = lm::compile(g, lm::Target::cpu());
  std::vector<float> xs(8, 1.0f), shared(12, 0.0f);
  std::map<std::string, lm::HostTensor> out{{"a", lm::HostTensor::view(lm::f32, {8}, shared.data())},
                                            {"b", lm::HostTensor::view(lm::f32, {8}, shared.data() + 4)}};
  const lm::Status s = f.run({{"x", lm::HostTensor::from(xs, {8})}}, out);
  CHECK_FALSE(s.ok);
  CHECK_THAT(s.message, Catch::Contains("share memory") && Catch::Contains("'a'") && Catch::Contains("'b'"));
  // Separate buffers work.
  std::vector<float> a(8), b(8);
  out = {{"a", lm::HostTensor::view(lm::f32, {8}, a.data())}, {"b", lm::HostTensor::view(lm::f32, {8}, b.data())}};
  REQUIRE(f.run({{"x", lm::HostTensor::from(xs, {8})}}, out).ok);
  CHECK(a[7] == 2.0f);
  CHECK(b[7] == 3.0f);
}

TEST_CASE("compile_only on the CPU generates and compiles the code", "[reliability][compile_only]") {
  lm::Graph g;
  lm::Tensor x = g.input("x", {16, 32});
  // A constant nobody else compiles, so the JIT cannot answer from memory.
  g.output("y", lm::tanh(x) * static_cast<float>(::getpid() % 1000 + 0.5));
  lm::CompileOptions o;
  o.compile_only = true;
  auto& jit = lm::cpu::Jit::global();
  const auto before = jit.stats();
  lm::Callable f = lm::compile(g, lm::Target::cpu(), o);
  const auto after = jit.stats();
  CHECK(f.report().generated_kernels > 0);  // was 0: no code generated at all
  CHECK(f.report().codegen_seconds > 0);
  CHECK(after.compiler_runs + after.disk_hits + after.memory_hits >
        before.compiler_runs + before.disk_hits + before.memory_hits);
  CHECK_THROWS_AS(f({{"x", lm::HostTensor(lm::f32, {16, 32})}}), lm::RuntimeError);
  std::map<std::string, lm::HostTensor> out;
  CHECK_FALSE(f.run({{"x", lm::HostTensor(lm::f32, {16, 32})}}, out).ok);
  // What compile_only made can be saved and run elsewhere.
  const fs::path file = fs::temp_directory_path() / ("luminal-rel-co-" + std::to_string(::getpid()) + ".lmp");
  f.save(file.string());
  lm::Callable h = lm::load(file.string());
  fs::remove(file);
  std::vector<float> xs(16 * 32, 0.25f);
  CHECK(h({{"x", lm::HostTensor::from(xs, {16, 32})}}).at("y").values<float>()[0] ==
        Approx(std::tanh(0.25f) * static_cast<float>(::getpid() % 1000 + 0.5)).epsilon(1e-6));
}

TEST_CASE("compile_only surfaces a C compiler failure", "[reliability][compile_only]") {
  // With no compiler and an empty cache folder, generating code must fail -- it was
  // skipped before, so compile_only 'succeeded' without ever compiling.
  const fs::path dir = fs::temp_directory_path() / ("luminal-rel-co-cache-" + std::to_string(::getpid()));
  const char* old = std::getenv("LUMINAL_CC");
  const std::string keep = old ? old : "";
  ::setenv("LUMINAL_CC", "/nonexistent/cc", 1);
  lm::Graph g;
  lm::Tensor x = g.input("x", {4});
  g.output("y", lm::sigmoid(x) + 0.123f);
  lm::CompileOptions o;
  o.compile_only = true;
  o.cache_dir = dir.string();
  bool threw = false;
  try {
    lm::compile(g, lm::Target::cpu(), o);
  } catch (const lm::CompileError&) {
    threw = true;
  }
  old ? ::setenv("LUMINAL_CC", keep.c_str(), 1) : ::unsetenv("LUMINAL_CC");
  std::error_code ec;
  fs::remove_all(dir, ec);
  CHECK(threw);
}
