// A downstream program: builds y = relu(x @ w + 1), compiles it for the best target
// present and checks every value against a plain loop; a shape mistake must name this
// file and line (luminal::Loc, whichever compiler builds this).
#include <luminal/luminal.hpp>

#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

namespace lm = luminal;

int main() {
  lm::Graph g;
  lm::Dim B = g.dim("B", 1, 8);
  lm::Tensor x = g.input("x", {B, 3});
  lm::Tensor w = g.param("w", {3, 2});
  g.output("y", lm::relu(lm::matmul(x, w) + 1.0f));

  lm::Callable fn = lm::compile(g, lm::Target::best());
  std::vector<float> wv{1, -1, 2, 0.5f, -3, 1};
  fn.bind("w", lm::HostTensor::from(wv, {3, 2}));
  std::vector<float> xv{1, 2, 3, -1, 0.5f, 2};
  auto out = fn({{"x", lm::HostTensor::from(xv, {2, 3})}});
  auto y = out.at("y").values<float>();
  if (out.at("y").shape() != std::vector<int64_t>{2, 2}) {
    std::puts("consumer: wrong output shape");
    return 1;
  }
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 2; ++j) {
      float acc = 1.0f;
      for (int k = 0; k < 3; ++k) acc += xv[i * 3 + k] * wv[k * 2 + j];
      float want = acc > 0 ? acc : 0;
      if (std::fabs(y[i * 2 + j] - want) > 1e-5f) {
        std::printf("consumer: y[%d,%d] = %g, want %g\n", i, j, y[i * 2 + j], want);
        return 1;
      }
    }
  lm::Tensor a = g.input("a", {2, 3});
  const int line = __LINE__ + 2;
  try {
    lm::matmul(a, a);
    std::puts("consumer: matmul of (2, 3) and (2, 3) did not throw");
    return 1;
  } catch (const lm::ShapeError& e) {
    const std::string at = "main.cpp:" + std::to_string(line);
    if (std::string(e.what()).find(at) == std::string::npos) {
      std::printf("consumer: the error does not name %s: %s\n", at.c_str(), e.what());
      return 1;
    }
  }
  std::printf("consumer: ok on %s\n", lm::Target::best().to_string().c_str());
  return 0;
}
