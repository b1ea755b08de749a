#include "ir/online_softmax.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

namespace luminal::ir {

namespace {
float nan_max(float a, float b) { return (b > a || b != b || a != a) ? (a != a ? a : b) : a; }
}  // namespace

float online_softmax_dot(const float* s, const float* v, int64_t n, int64_t stride, float c, int64_t block) {
  if (n <= 0) return 0.0f;  // a sum over no keys
  block = std::max<int64_t>(block, 1);
  const float ninf = -std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  float m = ninf, l = 0.0f, o = 0.0f;
  // Keys whose value is not finite, in every block (skipped ones too): the lowest score
  // among the +inf values and among the -inf values (the smallest weight of each sign).
  bool nan_v = false, pos_inf = false, neg_inf = false;
  float pos_min = 0, neg_min = 0;
  for (int64_t j0 = 0; j0 < n; j0 += block) {
    const int64_t j1 = std::min(n, j0 + block);
    float mx = ninf;
    for (int64_t j = j0; j < j1; ++j) {
      mx = nan_max(mx, s[j * stride]);
      const float x = v[j * stride];
      if (x != x) nan_v = true;
      if (x == std::numeric_limits<float>::infinity()) {
        pos_min = pos_inf ? std::min(pos_min, s[j * stride]) : s[j * stride];
        pos_inf = true;
      }
      if (x == ninf) {
        neg_min = neg_inf ? std::min(neg_min, s[j * stride]) : s[j * stride];
        neg_inf = true;
      }
    }
    if (mx == ninf) continue;  // a fully masked block: e_j = 0 for each of its keys
    float lb = 0.0f;
    for (int64_t j = j0; j < j1; ++j) lb += std::exp2((s[j * stride] - mx) * c);
    const float rb = 1.0f / lb;
    float ab = 0.0f;
    for (int64_t j = j0; j < j1; ++j) ab += (std::exp2((s[j * stride] - mx) * c) * rb) * v[j * stride];
    const float mn = nan_max(m, mx);
    const float w = lb * std::exp2((mx - mn) * c);
    const float old = l * std::exp2((m - mn) * c);  // m = -inf: l = 0 and exp2(-inf) = 0
    l = old + w;
    o = o * (old / l) + ab * (w / l);
    m = mn;
  }
  if (m == ninf || m != m || l != l) return nan;  // every key masked; a NaN or +inf score
  if (nan_v) return nan;
  if (pos_inf || neg_inf) {
    // The two-pass weight P_j = exp2((s_j - M) c) / L of the lowest-scored value of each sign.
    const float r = 1.0f / l;
    if (pos_inf && std::exp2((pos_min - m) * c) * r == 0.0f) return nan;
    if (neg_inf && std::exp2((neg_min - m) * c) * r == 0.0f) return nan;
    if (pos_inf && neg_inf) return nan;
    return pos_inf ? std::numeric_limits<float>::infinity() : ninf;
  }
  return o;
}

}  // namespace luminal::ir
