// The main demo: builds a small MLP block, compiles it for the best target on this
// machine, runs it, and prints the result and the compile report.
#include <luminal/luminal.hpp>

#include <cstdio>
#include <vector>

namespace lm = luminal;

int main() {
  lm::Graph g;
  lm::Dim B = g.dim("B", 1, 64);
  lm::Tensor x = g.input("x", {B, 8});
  lm::Tensor w1 = g.param("w1", {16, 8});
  lm::Tensor w2 = g.param("w2", {4, 16});
  lm::Tensor h = lm::gelu(lm::linear(x, w1));
  g.output("y", lm::softmax(lm::linear(h, w2), -1));

  lm::Target target = lm::Target::best();
  lm::Callable fn = lm::compile(g, target);

  std::vector<float> w1v(16 * 8), w2v(4 * 16), xv(2 * 8);
  for (size_t i = 0; i < w1v.size(); ++i) w1v[i] = 0.05f * static_cast<float>(static_cast<int>(i % 7) - 3);
  for (size_t i = 0; i < w2v.size(); ++i) w2v[i] = 0.1f * static_cast<float>(static_cast<int>(i % 5) - 2);
  for (size_t i = 0; i < xv.size(); ++i) xv[i] = 0.25f * static_cast<float>(i);
  fn.bind("w1", lm::HostTensor::from(w1v, {16, 8}));
  fn.bind("w2", lm::HostTensor::from(w2v, {4, 16}));

  auto out = fn({{"x", lm::HostTensor::from(xv, {2, 8})}});
  const lm::HostTensor& y = out.at("y");
  std::printf("target: %s\ny = softmax(linear(gelu(linear(x, w1)), w2)), shape (%lld, %lld):\n",
              target.to_string().c_str(), static_cast<long long>(y.shape()[0]),
              static_cast<long long>(y.shape()[1]));
  auto v = y.values<float>();
  for (int64_t i = 0; i < y.shape()[0]; ++i) {
    std::printf("  [");
    for (int64_t j = 0; j < y.shape()[1]; ++j) std::printf(" %.6f", v[i * y.shape()[1] + j]);
    std::printf(" ]\n");
  }
  std::printf("\n%s\n", fn.report().to_string().c_str());
  return 0;
}
