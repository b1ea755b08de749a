// A shape mismatch that cannot be proven at build time is a guard checked at call time
// (issue 3): a symbolic dim meeting a constant builds, runs when they agree, and throws
// RuntimeError (leaving the Callable usable) when they do not.
#include "ops_test_util.hpp"

using namespace ops_test;

TEST_CASE("symbolic dims meeting constants become call-time guards", "[ops][guards]") {
  lm::Graph g;
  lm::Dim n = g.dim("n", 2, 64);
  lm::Tensor a = g.input("a", {n});
  lm::Tensor b = g.input("b", {4});
  lm::Tensor x = g.input("x", {2, n});
  lm::Tensor w = g.param("w", {4, 3});
  g.output("s", a + b);
  g.output("m", lm::matmul(x, w));
  lm::Callable fn = lm::compile(g, lm::Target::reference());
  std::vector<float> wv(12);
  for (size_t i = 0; i < wv.size(); ++i) wv[i] = static_cast<float>(i) - 5.0f;
  fn.bind("w", f32(wv, {4, 3}));

  std::vector<float> av{1, 2, 3, 4}, bv{10, 20, 30, 40}, xv{1, 0, -1, 2, 0.5f, 1, 1, 1};
  auto good = [&] {
    auto out = fn({{"a", f32(av, {4})}, {"b", f32(bv, {4})}, {"x", f32(xv, {2, 4})}});
    check_close(out.at("s").to_f32(), {11, 22, 33, 44});
    std::vector<double> want;
    for (int i = 0; i < 2; ++i)
      for (int j = 0; j < 3; ++j) {
        double acc = 0;
        for (int k = 0; k < 4; ++k) acc += double(xv[i * 4 + k]) * wv[k * 3 + j];
        want.push_back(acc);
      }
    check_close(out.at("m").to_f32(), want, 1e-6);
  };
  good();
  // n = 5 contradicts b's 4 (and w's 4 rows): a clear RuntimeError, then still usable.
  std::vector<float> a5(5, 1.0f), x5(10, 1.0f);
  CHECK_THROWS_AS(fn({{"a", f32(a5, {5})}, {"b", f32(bv, {4})}, {"x", f32(x5, {2, 5})}}), lm::RuntimeError);
  good();

  // A mismatch that can be proven (n >= 2 never equals 1... but 70 is outside n's range).
  lm::Graph g2;
  lm::Dim m = g2.dim("m", 2, 64);
  CHECK_THROWS_AS(g2.input("p", {m}) + g2.input("q", {70}), lm::ShapeError);
}
