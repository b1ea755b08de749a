// Tensor's chaining members are the free functions: same values, same errors.
#include "ops_test_util.hpp"

using namespace ops_test;

TEST_CASE("Tensor members chain like the free functions", "[ops][members]") {
  lm::Graph g;
  lm::Tensor x = g.input("x", {2, 3});
  lm::Tensor y = x.transpose(0, 1).reshape({3, 2}).exp().sum(1, true).log() +
                 x.slice(1, 0, 2).abs().max({0, 1}) + x.mean().sqrt() + x.relu().softmax(0).min();
  std::vector<float> xv{0.5f, -1.0f, 2.0f, 0.25f, 1.5f, -0.75f};
  lm::HostTensor out = eval(g, y, {{"x", f32(xv, {2, 3})}});
  REQUIRE(out.shape() == std::vector<int64_t>{3, 1});

  // The same program written with free functions, evaluated in double by hand.
  double mean = 0;
  for (float v : xv) mean += v;
  mean /= 6;
  double absmax = 0;
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 2; ++j) absmax = std::max(absmax, std::fabs(double(xv[i * 3 + j])));
  double smin = 1e9;  // softmax over axis 0 of relu(x), then the global min
  for (int j = 0; j < 3; ++j) {
    double a = std::max(0.0, double(xv[j])), b = std::max(0.0, double(xv[3 + j]));
    double m = std::max(a, b), ea = std::exp(a - m), eb = std::exp(b - m);
    smin = std::min({smin, ea / (ea + eb), eb / (ea + eb)});
  }
  // transpose(0,1) of [2,3] is [3,2] with rows (x0j, x1j); reshape keeps it.
  std::vector<double> want;
  for (int j = 0; j < 3; ++j)
    want.push_back(std::log(std::exp(double(xv[j])) + std::exp(double(xv[3 + j]))) + absmax +
                   std::sqrt(mean) + smin);
  check_close(out.to_f32(), want, 1e-5, 1e-5);

  lm::Graph g2;
  lm::Tensor z = g2.input("z", {2, 3});
  CHECK_THROWS_AS(z.reshape({4, 2}), lm::ShapeError);
  CHECK_THROWS_AS(z.sum(5), lm::ShapeError);
  CHECK_THROWS_AS(z.matmul(z), lm::ShapeError);
}
