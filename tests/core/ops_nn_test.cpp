// Network ops through the reference interpreter, against double-precision references.
#include <cmath>
#include <limits>

#include "core/ops_test_util.hpp"

using namespace ops_test;
namespace lm = luminal;

namespace {
std::vector<float> ramp(size_t n, float scale = 0.37f, float offset = -1.1f) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = std::sin(static_cast<float>(i) * scale) * 1.5f + offset * 0.1f;
  return v;
}
}  // namespace

TEST_CASE("softmax and log_softmax along an axis", "[ops][nn]") {
  lm::Graph g;
  auto x = g.input("x", {2, 3});
  g.output("s", lm::softmax(x));
  g.output("s0", lm::softmax(x, 0));
  g.output("ls", lm::log_softmax(x, -1));
  auto fn = lm::compile(g, lm::Target::reference());
  std::vector<float> xs = {1, 2, 3, 1000, 1000, -1000};
  auto out = fn({{"x", f32(xs, {2, 3})}});
  const double z = std::exp(1.0) + std::exp(2.0) + std::exp(3.0);
  check_close(out.at("s").to_f32(), {std::exp(1.0) / z, std::exp(2.0) / z, std::exp(3.0) / z, 0.5, 0.5, 0},
              1e-7, 1e-6);
  check_close(out.at("s0").to_f32(), {0, 0, 1, 1, 1, 0}, 1e-7);
  check_close(out.at("ls").to_f32(),
              {1 - std::log(z), 2 - std::log(z), 3 - std::log(z), -std::log(2.0), -std::log(2.0),
               -2000 - std::log(2.0)},
              1e-6, 1e-6);
}

TEST_CASE("layer_norm and rms_norm over the last axis", "[ops][nn]") {
  lm::Graph g;
  auto x = g.input("x", {2, 4});
  auto w = g.param("w", {4});
  auto b = g.param("b", {4});
  g.output("ln", lm::layer_norm(x, w, b, 1e-5f));
  g.output("rms", lm::rms_norm(x, w));
  auto fn = lm::compile(g, lm::Target::reference());
  std::vector<float> ws = {1, 2, 0.5f, -1}, bs = {0, 1, 0, -1};
  fn.bind("w", f32(ws, {4}));
  fn.bind("b", f32(bs, {4}));
  std::vector<float> xs = {1, 2, 3, 4, -1, 0, 0, 5};
  auto out = fn({{"x", f32(xs, {2, 4})}});
  std::vector<double> ln, rms;
  for (int r = 0; r < 2; ++r) {
    double m = 0, v = 0, ss = 0;
    for (int i = 0; i < 4; ++i) m += xs[r * 4 + i] / 4.0;
    for (int i = 0; i < 4; ++i) v += (xs[r * 4 + i] - m) * (xs[r * 4 + i] - m) / 4.0;
    for (int i = 0; i < 4; ++i) ss += xs[r * 4 + i] * xs[r * 4 + i] / 4.0;
    for (int i = 0; i < 4; ++i) {
      ln.push_back((xs[r * 4 + i] - m) / std::sqrt(v + 1e-5) * ws[i] + bs[i]);
      rms.push_back(xs[r * 4 + i] / std::sqrt(ss + 1e-6) * ws[i]);
    }
  }
  check_close(out.at("ln").to_f32(), ln, 1e-6, 1e-5);
  check_close(out.at("rms").to_f32(), rms, 1e-6, 1e-5);
}

TEST_CASE("embedding gathers rows for ids of any shape", "[ops][nn]") {
  lm::Graph g;
  auto table = g.param("t", {3, 2});
  auto ids = g.input("ids", {2, 2}, lm::i32);
  auto y = lm::embedding(table, ids);
  g.output("y", y);
  auto fn = lm::compile(g, lm::Target::reference());
  fn.bind("t", f32({0, 1, 10, 11, 20, 21}, {3, 2}));
  auto out = fn({{"ids", i32({2, 0, 1, 2}, {2, 2})}}).at("y");
  CHECK(out.shape() == std::vector<int64_t>{2, 2, 2});
  check_exact(out, {20, 21, 0, 1, 10, 11, 20, 21});
}

TEST_CASE("rope rotates halves like Hugging Face Llama", "[ops][nn]") {
  const int S = 3, D = 4;
  const float theta = 100.f;
  lm::Graph g;
  auto x = g.input("x", {2, S, D});
  auto pos = g.input("pos", {S}, lm::i32);
  auto y = lm::rope(x, pos, theta);
  std::vector<float> xs = ramp(2 * S * D);
  std::vector<int32_t> ps = {0, 5, 17};
  auto out = eval(g, y, {{"x", f32(xs, {2, S, D})}, {"pos", i32(ps, {S})}});
  std::vector<double> want;
  for (int b = 0; b < 2; ++b) {
    for (int s = 0; s < S; ++s) {
      for (int d = 0; d < D; ++d) {
        const int i = d % (D / 2);
        const double ang = ps[s] * std::pow(static_cast<double>(theta), -2.0 * i / D);
        const float* row = &xs[(b * S + s) * D];
        const double rot = d < D / 2 ? -row[d + D / 2] : row[d - D / 2];
        want.push_back(row[d] * std::cos(ang) + rot * std::sin(ang));
      }
    }
  }
  check_close(out.to_f32(), want, 2e-6, 1e-5);
}

TEST_CASE("scaled_dot_product_attention, causal aligned bottom-right", "[ops][nn]") {
  const int Sq = 2, Sk = 3, D = 2, Dv = 3;
  for (bool causal : {false, true}) {
    lm::Graph g;
    auto q = g.input("q", {1, Sq, D});
    auto k = g.input("k", {1, Sk, D});
    auto v = g.input("v", {1, Sk, Dv});
    auto qs = ramp(Sq * D, 0.5f), ks = ramp(Sk * D, 0.7f, 0.3f), vs = ramp(Sk * Dv, 0.9f, 2.f);
    auto out = eval(g, lm::scaled_dot_product_attention(q, k, v, causal),
                    {{"q", f32(qs, {1, Sq, D})}, {"k", f32(ks, {1, Sk, D})}, {"v", f32(vs, {1, Sk, Dv})}});
    std::vector<double> want;
    for (int i = 0; i < Sq; ++i) {
      std::vector<double> s(Sk);
      double mx = -1e300, z = 0;
      for (int j = 0; j < Sk; ++j) {
        s[j] = 0;
        for (int d = 0; d < D; ++d) s[j] += static_cast<double>(qs[i * D + d]) * ks[j * D + d];
        s[j] /= std::sqrt(static_cast<double>(D));
        if (causal && j > i + (Sk - Sq)) s[j] = -std::numeric_limits<double>::infinity();
        mx = std::max(mx, s[j]);
      }
      for (int j = 0; j < Sk; ++j) z += std::exp(s[j] - mx);
      for (int e = 0; e < Dv; ++e) {
        double acc = 0;
        for (int j = 0; j < Sk; ++j) acc += std::exp(s[j] - mx) / z * vs[j * Dv + e];
        want.push_back(acc);
      }
    }
    INFO("causal " << causal);
    check_close(out.to_f32(), want, 1e-6, 1e-5);
  }
}

namespace {
// Direct-loop conv2d in double: x [N, C, H, W], w [O, C/groups, KH, KW].
std::vector<double> conv_ref(const std::vector<float>& x, const std::vector<float>& w,
                             const std::vector<float>& b, int N, int C, int H, int W, int O, int KH, int KW,
                             std::array<int, 2> st, std::array<int, 2> pd, std::array<int, 2> dl, int groups,
                             int& Ho, int& Wo) {
  Ho = (H + 2 * pd[0] - dl[0] * (KH - 1) - 1) / st[0] + 1;
  Wo = (W + 2 * pd[1] - dl[1] * (KW - 1) - 1) / st[1] + 1;
  const int Cg = C / groups, Og = O / groups;
  std::vector<double> y;
  for (int n = 0; n < N; ++n)
    for (int o = 0; o < O; ++o)
      for (int i = 0; i < Ho; ++i)
        for (int j = 0; j < Wo; ++j) {
          double acc = b.empty() ? 0 : b[o];
          const int gi = o / Og;
          for (int cg = 0; cg < Cg; ++cg)
            for (int kh = 0; kh < KH; ++kh)
              for (int kw = 0; kw < KW; ++kw) {
                int h = i * st[0] - pd[0] + kh * dl[0], ww = j * st[1] - pd[1] + kw * dl[1];
                if (h < 0 || h >= H || ww < 0 || ww >= W) continue;
                const int c = gi * Cg + cg;
                acc += static_cast<double>(x[((n * C + c) * H + h) * W + ww]) *
                       w[((o * Cg + cg) * KH + kh) * KW + kw];
              }
          y.push_back(acc);
        }
  return y;
}
}  // namespace

TEST_CASE("conv2d with stride, padding, dilation and groups matches a direct loop", "[ops][nn]") {
  struct Case {
    int N, C, H, W, O, KH, KW;
    std::array<int, 2> st, pd, dl;
    int groups;
    bool bias;
  };
  for (const Case& k : {Case{1, 3, 5, 5, 2, 3, 3, {1, 1}, {1, 1}, {1, 1}, 1, true},
                        Case{2, 4, 6, 5, 6, 2, 3, {2, 1}, {0, 2}, {1, 2}, 2, false},
                        Case{1, 2, 4, 4, 2, 1, 1, {1, 1}, {0, 0}, {1, 1}, 2, true}}) {
    lm::Graph g;
    auto x = g.input("x", {k.N, k.C, k.H, k.W});
    auto w = g.input("w", {k.O, k.C / k.groups, k.KH, k.KW});
    auto b = g.input("b", {k.O});
    auto xs = ramp(static_cast<size_t>(k.N * k.C * k.H * k.W));
    auto ws = ramp(static_cast<size_t>(k.O * (k.C / k.groups) * k.KH * k.KW), 0.61f, 0.5f);
    auto bs = ramp(static_cast<size_t>(k.O), 1.3f);
    auto y = lm::conv2d(x, w, k.bias ? b : lm::Tensor(), k.st, k.pd, k.dl, k.groups);
    g.output("y", y);
    g.output("keep_b", b);
    auto fn = lm::compile(g, lm::Target::reference());
    auto out = fn({{"x", f32(xs, {k.N, k.C, k.H, k.W})},
                   {"w", f32(ws, {k.O, k.C / k.groups, k.KH, k.KW})},
                   {"b", f32(bs, {k.O})}})
                   .at("y");
    int Ho = 0, Wo = 0;
    auto want = conv_ref(xs, ws, k.bias ? bs : std::vector<float>{}, k.N, k.C, k.H, k.W, k.O, k.KH, k.KW,
                         k.st, k.pd, k.dl, k.groups, Ho, Wo);
    CHECK(out.shape() == std::vector<int64_t>{k.N, k.O, Ho, Wo});
    check_close(out.to_f32(), want, 1e-5, 1e-5);
  }
}

TEST_CASE("conv1d is conv2d over a height-1 image", "[ops][nn]") {
  lm::Graph g;
  auto x = g.input("x", {1, 2, 5});
  auto w = g.input("w", {2, 1, 2});
  auto out = eval(
      g, lm::conv1d(x, w, {}, 2, 1, 1, 2),
      {{"x", f32({1, 2, 3, 4, 5, 10, 20, 30, 40, 50}, {1, 2, 5})}, {"w", f32({1, -1, 2, 1}, {2, 1, 2})}});
  // padded ch0: 0 1 2 3 4 5 0, windows at 0,2,4: (0,1) (2,3) (4,5) with w (1,-1) -> -1 -1 -1
  // padded ch1: 0 10 20 30 40 50 0 with w (2,1) -> 10 70 130
  CHECK(out.shape() == std::vector<int64_t>{1, 2, 3});
  check_exact(out, {-1, -1, -1, 10, 70, 130});
}

TEST_CASE("max_pool2d pads with -inf, avg_pool2d counts padding", "[ops][nn]") {
  lm::Graph g;
  auto x = g.input("x", {1, 1, 3, 3});
  g.output("mp", lm::max_pool2d(x, {2, 2}, {1, 1}, {1, 1}));
  g.output("mp2", lm::max_pool2d(x, {2, 2}));
  g.output("ap", lm::avg_pool2d(x, {3, 3}, {2, 2}, {1, 1}));
  auto fn = lm::compile(g, lm::Target::reference());
  auto out = fn({{"x", f32({-1, -2, -3, -4, -5, -6, -7, -8, -9}, {1, 1, 3, 3})}});
  CHECK(out.at("mp").shape() == std::vector<int64_t>{1, 1, 4, 4});
  check_exact(out.at("mp"), {-1, -1, -2, -3, -1, -1, -2, -3, -4, -4, -5, -6, -7, -7, -8, -9});
  CHECK(out.at("mp2").shape() == std::vector<int64_t>{1, 1, 1, 1});
  check_exact(out.at("mp2"), {-1});
  CHECK(out.at("ap").shape() == std::vector<int64_t>{1, 1, 2, 2});
  check_close(out.at("ap").to_f32(), {-12 / 9.0, -16 / 9.0, -24 / 9.0, -28 / 9.0}, 1e-6);
}
