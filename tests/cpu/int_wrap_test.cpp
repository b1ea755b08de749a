// i32 arithmetic wraps around on every target, as in PyTorch and the reference
// interpreter. The C compiler must not treat signed overflow as impossible (-fwrapv): it
// once rewrote (a + b) < a to b < 0, so INT32_MAX + 1 < INT32_MAX was false on the CPU.
// INT32_MIN % -1 must not trap (PyTorch raises SIGFPE there; the interpreter defines 0).
#include <catch2/catch.hpp>

#include <climits>
#include <cstdint>
#include <vector>

#include "luminal/luminal.hpp"

namespace lm = luminal;

TEST_CASE("i32 wraps around like PyTorch on every target", "[cpu][int]") {
  lm::Graph g;
  lm::Tensor a = g.input("a", {6}, lm::i32);
  lm::Tensor b = g.input("b", {6}, lm::i32);
  g.output("sum_below", lm::less(a + b, a));  // torch: (a + b) < a
  g.output("product", a * b);
  g.output("negated", -a);
  g.output("remainder", lm::mod(a, b));
  g.output("total", lm::sum(a, {0}));
  const std::vector<int32_t> av = {INT32_MAX, 5, INT32_MIN, 65536, INT32_MIN, 1};
  const std::vector<int32_t> bv = {1, 1, -1, 65536, -1, 2};
  std::map<std::string, lm::HostTensor> in = {{"a", lm::HostTensor::from(av, {6})},
                                             {"b", lm::HostTensor::from(bv, {6})}};
  // Expected values: two's complement wrap-around (what torch computes for int32).
  const std::vector<bool> below = {true, false, false, false, false, false};
  const std::vector<int32_t> product = {INT32_MAX, 5, INT32_MIN, 0, INT32_MIN, 2};
  const std::vector<int32_t> negated = {-INT32_MAX, -5, INT32_MIN, -65536, INT32_MIN, -1};
  const std::vector<int32_t> remainder = {0, 0, 0, 0, 0, 1};
  // INT32_MAX + 5 + INT32_MIN + 65536 + INT32_MIN + 1, modulo 2^32.
  const int32_t total = static_cast<int32_t>(static_cast<uint32_t>(INT32_MAX) + 5u + 0x80000000u + 65536u +
                                             0x80000000u + 1u);
  for (const lm::Target& t : {lm::Target::reference(), lm::Target::cpu()}) {
    INFO(t.to_string());
    auto out = lm::compile(g, t)(in);
    auto lt = out.at("sum_below").values<bool>();
    CHECK(std::vector<bool>(lt.begin(), lt.end()) == below);
    auto p = out.at("product").values<int32_t>();
    CHECK(std::vector<int32_t>(p.begin(), p.end()) == product);
    auto n = out.at("negated").values<int32_t>();
    CHECK(std::vector<int32_t>(n.begin(), n.end()) == negated);
    auto r = out.at("remainder").values<int32_t>();
    CHECK(std::vector<int32_t>(r.begin(), r.end()) == remainder);
    CHECK(out.at("total").values<int32_t>()[0] == total);
  }
}
