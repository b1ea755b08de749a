// The online-softmax identity (ir/online_softmax.hpp), the value of an Attention kernel
// node: against the two-pass definition at its edges, where a naive recurrence is wrong;
// and the search making the streaming kernel through the rule online-softmax only.
#include <catch2/catch.hpp>
#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "ir/online_softmax.hpp"
#include "translation_models.hpp"

using namespace luminal;

namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kC = 1.4426950408889634f;  // log2(e): softmax

// The two-pass definition, as the body computes it: M, e_j, L, then sum_j (e_j / L) v_j.
float two_pass(const std::vector<float>& s, const std::vector<float>& v) {
  float m = -kInf;
  for (float x : s) m = (x > m || x != x) ? x : m;
  float l = 0;
  std::vector<float> e(s.size());
  for (size_t j = 0; j < s.size(); ++j) l += e[j] = std::exp2((s[j] - m) * kC);
  const float r = 1.0f / l;
  float o = 0;
  for (size_t j = 0; j < s.size(); ++j) o += (e[j] * r) * v[j];
  return o;
}

// The textbook recurrence without the guard: blocks rescaled by exp2((m_old - m_new) c)
// whatever m_old is.
float naive_online(const std::vector<float>& s, const std::vector<float>& v, size_t block) {
  float m = -kInf, l = 0, o = 0;
  for (size_t j0 = 0; j0 < s.size(); j0 += block) {
    float mb = -kInf;
    for (size_t j = j0; j < std::min(s.size(), j0 + block); ++j) mb = std::max(mb, s[j]);
    const float mn = std::max(m, mb), a = std::exp2((m - mn) * kC);
    l *= a;
    o *= a;
    for (size_t j = j0; j < std::min(s.size(), j0 + block); ++j) {
      const float e = std::exp2((s[j] - mn) * kC);
      l += e;
      o += e * v[j];
    }
    m = mn;
  }
  return o / l;
}

float online(const std::vector<float>& s, const std::vector<float>& v, int64_t block) {
  return ir::online_softmax_dot(s.data(), v.data(), static_cast<int64_t>(s.size()), 1, kC, block);
}

// NaN-ness and infinities exactly; otherwise within rounding of the values' magnitude
// `scale` (a convex combination of values can cancel to near 0).
bool same_class(float a, float b, float scale) {
  if (std::isnan(a) || std::isnan(b)) return std::isnan(a) && std::isnan(b);
  if (std::isinf(a) || std::isinf(b)) return a == b;
  return std::fabs(a - b) <= 1e-5f * std::max({scale, std::fabs(a), std::fabs(b)});
}

}  // namespace

TEST_CASE("online softmax equals the two passes on random rows, any block size",
          "[compiler][online-softmax]") {
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> u(-6, 6);
  for (int t = 0; t < 400; ++t) {
    const size_t n = 1 + rng() % 40;
    std::vector<float> s(n), v(n);
    for (size_t j = 0; j < n; ++j) {
      s[j] = rng() % 4 == 0 ? -kInf : u(rng) * (t % 3 == 0 ? 30.0f : 1.0f);  // masked keys; wide gaps
      v[j] = u(rng);
    }
    s[rng() % n] = u(rng);  // one key visible
    for (int64_t b : {1, 2, 3, 5, 32}) {
      INFO("trial " << t << " n " << n << " block " << b);
      CHECK(same_class(online(s, v, b), two_pass(s, v), 6.0f));
    }
  }
}

TEST_CASE("online softmax at the edges, where the naive recurrence is wrong", "[compiler][online-softmax]") {
  const float big = 3e38f, nan = std::numeric_limits<float>::quiet_NaN();
  struct Case {
    const char* what;
    std::vector<float> s, v;
  };
  const std::vector<Case> cases = {
      // A causal row: the first block sees keys, the second is masked (above the diagonal).
      {"fully masked second block", {0.5f, 1.0f, -kInf, -kInf}, {1, 2, 3, 4}},
      // Masked first block: the running max is -inf when the first live block arrives.
      {"fully masked first block", {-kInf, -kInf, 0.5f, 1.0f}, {1, 2, 3, 4}},
      {"every key masked", {-kInf, -kInf, -kInf}, {1, 2, 3}},
      {"inf value under a masked key", {0.5f, 1.0f, -kInf, -kInf}, {1, 2, kInf, 4}},
      {"inf value at a visible key", {0.5f, 1.0f, -kInf, -kInf}, {kInf, 2, 3, 4}},
      {"+inf and -inf values", {0.5f, 1.0f, 0.7f}, {kInf, -kInf, 4}},
      {"inf value whose weight underflows", {0.0f, -200.0f, 0.1f, 0.2f}, {1, kInf, 3, 4}},
      {"NaN value under a masked key", {0.5f, -kInf}, {1, nan}},
      {"NaN score", {0.5f, nan, 1.0f, 2.0f}, {1, 2, 3, 4}},
      {"+inf score", {0.5f, kInf, 1.0f}, {1, 2, 3}},
      {"values near overflow", {1.0f, 1.0f, 1.0f, 1.0f}, {big, big, big, big}},
      {"-0 values", {1.0f, 1.0f}, {-0.0f, -0.0f}},
  };
  for (const Case& c : cases)
    for (int64_t b : {1, 2, 3}) {
      float scale = 0;
      for (float x : c.v) scale = std::isfinite(x) ? std::max(scale, std::fabs(x)) : scale;
      INFO(c.what << ", block " << b << ": online " << online(c.s, c.v, b) << ", two passes "
                  << two_pass(c.s, c.v));
      CHECK(same_class(online(c.s, c.v, b), two_pass(c.s, c.v), scale));
      if (!std::isnan(two_pass(c.s, c.v)))  // the sign of a zero (a NaN's sign is its payload)
        CHECK(std::signbit(online(c.s, c.v, b)) == std::signbit(two_pass(c.s, c.v)));
    }
  // No keys: the two-pass sum over an empty axis is +0.
  CHECK(ir::online_softmax_dot(nullptr, nullptr, 0, 1, kC, 2) == 0.0f);
  CHECK(!std::signbit(ir::online_softmax_dot(nullptr, nullptr, 0, 1, kC, 2)));
  // Why the guard: the naive recurrence gives NaN on a fully masked first block (exp2(-inf
  // + inf)) where the two passes give a number, and overflows near FLT_MAX.
  CHECK(std::isnan(naive_online({-kInf, -kInf, 0.5f, 1.0f}, {1, 2, 3, 4}, 2)));
  CHECK(std::isfinite(two_pass({-kInf, -kInf, 0.5f, 1.0f}, {1, 2, 3, 4})));
  CHECK(std::isinf(naive_online({1, 1, 1, 1}, {big, big, big, big}, 2)));
  CHECK(std::isfinite(two_pass({1, 1, 1, 1}, {big, big, big, big})));
}

TEST_CASE("the streaming attention kernel comes from the online-softmax rule", "[compiler][online-softmax]") {
  Graph g;
  Tensor q = g.input("q", {2, 6, 8}), k = g.input("k", {2, 9, 8}), v = g.input("v", {2, 9, 8});
  g.output("y", scaled_dot_product_attention(q, k, v, true));
  auto count = [](const test::Validation& val, ir::KernelKind kind) {
    int n = 0;
    for (const auto& st : val.program.plan->steps) n += st.spec->kind == kind ? 1 : 0;
    return n;
  };
  auto with = test::validate(g);
  CHECK(with.error <= 1.0);
  CHECK(count(with, ir::KernelKind::Attention) == 1);
  CHECK(with.program.report.kernels == 1);
  // Without the rule the two-pass kernel has no cost, so nothing streams: the product,
  // the softmax and the second product are kernels of their own.
  CompileOptions o;
  o.skip_rules = {"online-softmax"};
  auto without = test::validate(g, o);
  CHECK(without.error <= 1.0);
  CHECK(count(without, ir::KernelKind::Attention) == 0);
  CHECK(count(without, ir::KernelKind::AttentionTwoPass) == 0);
  CHECK(without.program.report.kernels > 1);
}
