// CompileOptions::validate: the compiled program runs once against the reference
// interpreter on random inputs, and a disagreement is a CompileError -- shown with a
// program broken on purpose after the search (a test-only hook swaps two kernel
// arguments: x - y then computes y - x).
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "compiler/validate.hpp"
#include "luminal/luminal.hpp"

namespace {

using namespace luminal;

Graph difference_graph() {
  Graph g;
  Tensor x = g.input("x", {2, 3}, f32);
  Tensor y = g.input("y", {2, 3}, f32);
  g.output("d", exp(x) - y * 2.f);
  return g;
}

std::map<std::string, HostTensor> inputs() {
  return {{"x", HostTensor::from(std::vector<float>{0, 1, 2, 3, 4, 5}, {2, 3})},
          {"y", HostTensor::from(std::vector<float>{5, 4, 3, 2, 1, 0}, {2, 3})}};
}

// Swaps the first two distinct arguments of the first kernel that has them.
void swap_kernel_arguments(compiler::KernelPlan& plan) {
  for (auto& st : plan.steps)
    if (st.args.size() >= 2 && st.args[0] != st.args[1]) {
      std::swap(st.args[0], st.args[1]);
      return;
    }
}

struct HookGuard {
  explicit HookGuard(std::function<void(compiler::KernelPlan&)> f) { compiler::plan_hook_for_tests() = std::move(f); }
  ~HookGuard() { compiler::plan_hook_for_tests() = nullptr; }
};

}  // namespace

TEST_CASE("validate passes a correct program on every target", "[compiler][validate]") {
  Graph g = difference_graph();
  CompileOptions o;
  o.validate = true;
  for (const Target& t : {Target::reference(), Target::cpu()}) {
    INFO(t.to_string());
    Callable c = compile(g, t, o);
    const auto out = c(inputs());
    auto d = out.at("d").values<float>();
    CHECK(d[0] == Approx(1.0 - 10.0));
    CHECK(d[5] == Approx(std::exp(5.0)));
  }
}

TEST_CASE("validate catches a program that disagrees with the interpreter", "[compiler][validate]") {
  Graph g = difference_graph();
  HookGuard hook(swap_kernel_arguments);
  for (const Target& t : {Target::reference(), Target::cpu()}) {
    INFO(t.to_string());
    // Without validation the broken program is returned and answers wrong...
    Callable broken = compile(g, t);
    const auto out = broken(inputs());
    auto d = out.at("d").values<float>();
    CHECK_FALSE(d[0] == Approx(1.0 - 10.0));
    // ...with it, compile refuses it.
    CompileOptions o;
    o.validate = true;
    CHECK_THROWS_AS(compile(g, t, o), CompileError);
    CHECK_THROWS_WITH(compile(g, t, o), Catch::Contains("disagrees with the reference interpreter"));
  }
}
