// Ahead of time: Callable::save then luminal::load with no C compiler (LUMINAL_CC points
// nowhere, and the JIT must not run), same results; corrupt files are clear errors.
#include <catch2/catch.hpp>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "backends/cpu/jit.hpp"
#include "compiler/translation_models.hpp"
#include "luminal/luminal.hpp"

namespace lm = luminal;

TEST_CASE("cpu: a saved program loads and runs without a compiler", "[cpu][e2e][aot]") {
  lm::Graph g;
  lm::Dim B = g.dim("B", 1, 32);
  lm::Tensor x = g.input("x", {B, 16});
  lm::Tensor y = lm::linear(lm::gelu(lm::linear(x, g.param("w1", {32, 16}), g.param("b1", {32}))),
                            g.param("w2", {8, 32}));
  g.output("y", lm::softmax(y, -1));
  auto all = lm::test::random_inputs(*g.impl(), 9, {{"B", 5}});
  lm::Callable f = lm::compile(g, lm::Target::cpu());
  for (const auto& p : f.param_names()) f.bind(p, all.at(p));
  std::map<std::string, lm::HostTensor> in{{"x", all.at("x")}};
  auto want = f(in);

  const auto path =
      std::filesystem::temp_directory_path() / ("luminal-aot-test-" + std::to_string(::getpid()) + ".lmp");
  f.save(path.string());
  const char* old_cc = std::getenv("LUMINAL_CC");
  const std::string keep = old_cc ? old_cc : "";
  ::setenv("LUMINAL_CC", "/nonexistent", 1);
  const auto runs_before = lm::cpu::Jit::global().stats().compiler_runs;
  lm::Callable h = lm::load(path.string());
  CHECK(lm::cpu::Jit::global().stats().compiler_runs == runs_before);
  if (old_cc)
    ::setenv("LUMINAL_CC", keep.c_str(), 1);
  else
    ::unsetenv("LUMINAL_CC");

  CHECK(h.input_names() == f.input_names());
  CHECK(h.report().generated_kernels == f.report().generated_kernels);
  auto got = h(in);  // params were saved with the program
  CHECK(lm::test::compare_outputs(got, want, 0, 0) == 0);
  // another dynamic size through the loaded program
  auto all2 = lm::test::random_inputs(*g.impl(), 10, {{"B", 17}});
  std::map<std::string, lm::HostTensor> in2{{"x", all2.at("x")}};
  CHECK(lm::test::compare_outputs(h(in2), f(in2), 0, 0) == 0);

  // truncated and foreign files are errors, not crashes
  {
    std::ifstream src(path, std::ios::binary);
    std::string bytes((std::istreambuf_iterator<char>(src)), std::istreambuf_iterator<char>());
    std::ofstream(path.string() + ".cut", std::ios::binary) << bytes.substr(0, bytes.size() / 2);
    std::ofstream(path.string() + ".bad", std::ios::binary) << "hello";
  }
  CHECK_THROWS_AS(lm::load(path.string() + ".cut"), lm::RuntimeError);
  CHECK_THROWS_AS(lm::load(path.string() + ".bad"), lm::RuntimeError);
  CHECK_THROWS_AS(lm::load(path.string() + ".missing"), lm::RuntimeError);
  std::filesystem::remove(path);
  std::filesystem::remove(path.string() + ".cut");
  std::filesystem::remove(path.string() + ".bad");
}
