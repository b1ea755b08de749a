// The C prelude's math, compiled by the JIT exactly as kernels use it (vectorized loops
// under the production flags), swept against double-precision libm: asserts the maximum
// errors stated in c_prelude.hpp, the special values, and exact f16/bf16 conversions.
#include <catch2/catch.hpp>

#include <cfloat>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <random>
#include <vector>

#include "backends/cpu/c_prelude.hpp"
#include "backends/cpu/jit.hpp"

using luminal::cpu::PreludeBounds;

namespace {

using VecFn = void (*)(const float*, float*, int64_t);

const luminal::cpu::JitLibrary& prelude_lib() {
  static std::shared_ptr<const luminal::cpu::JitLibrary> lib = [] {
    std::string src = luminal::cpu::c_prelude();
    src += R"(
#define W(fn) void w_##fn(const float* restrict x, float* restrict y, int64_t n) { \
  _Pragma("omp simd") for (int64_t i = 0; i < n; ++i) y[i] = lm_##fn(x[i]); }
W(exp) W(exp2) W(log) W(log2) W(sin) W(cos) W(tanh) W(sigmoid) W(erf) W(gelu_tanh)
void f16_from(const uint16_t* restrict h, float* restrict y, int64_t n) {
  _Pragma("omp simd") for (int64_t i = 0; i < n; ++i) y[i] = lm_f16_to_f32(h[i]); }
void f16_to(const float* restrict x, uint16_t* restrict h, int64_t n) {
  _Pragma("omp simd") for (int64_t i = 0; i < n; ++i) h[i] = lm_f32_to_f16(x[i]); }
void bf16_to(const float* restrict x, uint16_t* restrict h, int64_t n) {
  _Pragma("omp simd") for (int64_t i = 0; i < n; ++i) h[i] = lm_f32_to_bf16(x[i]); }
float bf16_from1(uint16_t h) { return lm_bf16_to_f32(h); }
)";
    return luminal::cpu::Jit::global().compile(src);
  }();
  return *lib;
}

std::vector<float> run_fn(const char* name, const std::vector<float>& x) {
  std::vector<float> y(x.size());
  prelude_lib().function<VecFn>(std::string("w_") + name)(x.data(), y.data(), static_cast<int64_t>(x.size()));
  return y;
}

// f32 spacing at the exact result r (subnormal spacing below FLT_MIN).
double ulp_at(double r) {
  int e;
  std::frexp(r, &e);
  return std::ldexp(1.0, std::max(e - 1, -126) - 23);
}

struct Sweep {
  double max_ulp = 0, max_abs = 0, worst_x = 0;
};

Sweep measure(const char* name, const std::vector<float>& x, double (*ref)(double), double min_result = 0) {
  std::vector<float> y = run_fn(name, x);
  Sweep s;
  for (size_t i = 0; i < x.size(); ++i) {
    double r = ref(x[i]);
    if (std::abs(r) < min_result || !std::isfinite(r)) continue;
    double err = std::abs(static_cast<double>(y[i]) - r);
    double u = err / ulp_at(r);
    if (u > s.max_ulp) s.max_ulp = u, s.worst_x = x[i];
    s.max_abs = std::max(s.max_abs, err);
  }
  std::printf("  %-8s max %.3f ulp (at x=%.9g), max abs %.3g over %zu points\n", name, s.max_ulp, s.worst_x,
              s.max_abs, x.size());
  return s;
}

std::vector<float> uniform(float lo, float hi, size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(lo, hi);
  std::vector<float> v(n);
  for (auto& e : v) e = d(rng);
  return v;
}

// Random bit patterns: every exponent equally likely (covers tiny and huge inputs).
std::vector<float> random_bits(size_t n, uint32_t seed, bool positive_only) {
  std::mt19937 rng(seed);
  std::vector<float> v;
  v.reserve(n);
  while (v.size() < n) {
    uint32_t b = rng();
    if (positive_only) b &= 0x7fffffffu;
    float f;
    std::memcpy(&f, &b, 4);
    if (std::isfinite(f)) v.push_back(f);
  }
  return v;
}

std::vector<float> concat(std::vector<float> a, const std::vector<float>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

double sigmoid_ref(double x) { return 1.0 / (1.0 + std::exp(-x)); }
double exp_ref(double x) { return std::exp(x); }
double exp2_ref(double x) { return std::exp2(x); }
double log_ref(double x) { return std::log(x); }
double log2_ref(double x) { return std::log2(x); }
double sin_ref(double x) { return std::sin(x); }
double cos_ref(double x) { return std::cos(x); }
double tanh_ref(double x) { return std::tanh(x); }
double erf_ref(double x) { return std::erf(x); }

constexpr size_t kN = 1 << 20;

}  // namespace

TEST_CASE("prelude exp/exp2/log/log2 within the stated ulp", "[cpu][prelude]") {
  auto xe = concat(uniform(-103.0f, 88.7f, kN, 1), uniform(-1.0f, 1.0f, kN / 4, 2));
  CHECK(measure("exp", xe, exp_ref, FLT_MIN).max_ulp <= PreludeBounds::exp_ulp);
  auto x2 = concat(uniform(-149.0f, 127.99f, kN, 3), uniform(-1.0f, 1.0f, kN / 4, 4));
  CHECK(measure("exp2", x2, exp2_ref, FLT_MIN).max_ulp <= PreludeBounds::exp2_ulp);
  auto xl = concat(random_bits(kN, 5, true), uniform(0.5f, 2.0f, kN / 2, 6));
  CHECK(measure("log", xl, log_ref).max_ulp <= PreludeBounds::log_ulp);
  CHECK(measure("log2", xl, log2_ref).max_ulp <= PreludeBounds::log2_ulp);
}

TEST_CASE("prelude sin/cos within the stated error", "[cpu][prelude]") {
  auto wide = uniform(-8192.0f, 8192.0f, kN, 7);
  CHECK(measure("sin", wide, sin_ref).max_abs <= PreludeBounds::sincos_abs);
  CHECK(measure("cos", wide, cos_ref).max_abs <= PreludeBounds::sincos_abs);
  auto near = concat(uniform(-0.785f, 0.785f, kN / 2, 8), uniform(-1e-3f, 1e-3f, kN / 8, 9));
  CHECK(measure("sin", near, sin_ref).max_ulp <= PreludeBounds::sincos_ulp);
  CHECK(measure("cos", near, cos_ref).max_ulp <= PreludeBounds::sincos_ulp);
}

TEST_CASE("prelude tanh/sigmoid/erf within the stated ulp", "[cpu][prelude]") {
  auto xt = concat(uniform(-12.0f, 12.0f, kN, 10), uniform(-0.7f, 0.7f, kN / 2, 11));
  xt = concat(xt, uniform(-0.02f, 0.02f, kN / 2, 18));  // where em / (em + 2) reached 3.2 ulp
  xt = concat(xt, random_bits(kN / 4, 12, false));
  CHECK(measure("tanh", xt, tanh_ref).max_ulp <= PreludeBounds::tanh_ulp);
  auto xs = concat(uniform(-87.0f, 30.0f, kN, 13), uniform(-2.0f, 2.0f, kN / 4, 14));
  CHECK(measure("sigmoid", xs, sigmoid_ref, FLT_MIN).max_ulp <= PreludeBounds::sigmoid_ulp);
  auto xr = concat(uniform(-5.0f, 5.0f, kN, 15), uniform(-1.2f, 1.2f, kN / 2, 16));
  xr = concat(xr, random_bits(kN / 4, 17, false));
  CHECK(measure("erf", xr, erf_ref).max_ulp <= PreludeBounds::erf_ulp);
}

TEST_CASE("prelude special values", "[cpu][prelude]") {
  const float inf = INFINITY, nan = NAN;
  std::vector<float> x = {inf, -inf, nan, 0.0f, -0.0f, -1.0f, 1.0f};
  auto e = run_fn("exp", x);
  CHECK(e[0] == inf);
  CHECK(e[1] == 0.0f);
  CHECK(std::isnan(e[2]));
  CHECK(e[3] == 1.0f);
  auto l = run_fn("log", x);
  CHECK(l[0] == inf);
  CHECK(std::isnan(l[1]));
  CHECK(std::isnan(l[2]));
  CHECK(l[3] == -inf);
  CHECK(l[4] == -inf);
  CHECK(std::isnan(l[5]));
  CHECK(l[6] == 0.0f);
  auto t = run_fn("tanh", x);
  CHECK(t[0] == 1.0f);
  CHECK(t[1] == -1.0f);
  CHECK(std::isnan(t[2]));
  CHECK(t[3] == 0.0f);
  auto s = run_fn("sigmoid", x);
  CHECK(s[0] == 1.0f);
  CHECK(s[1] == 0.0f);
  CHECK(std::isnan(s[2]));
  CHECK(s[3] == 0.5f);
  auto r = run_fn("erf", x);
  CHECK(r[0] == 1.0f);
  CHECK(r[1] == -1.0f);
  CHECK(std::isnan(r[2]));
  auto sn = run_fn("sin", x);
  CHECK(std::isnan(sn[0]));
  CHECK(std::isnan(sn[2]));
  CHECK(sn[3] == 0.0f);
  // outside the stated domain the reduction fails, but results stay within [-1, 1]
  for (const char* f : {"sin", "cos"})
    for (float v : run_fn(f, {1e10f, -3e25f, 8388609.0f, 1e38f, -FLT_MAX})) CHECK(std::abs(v) <= 1.0f);
  CHECK(run_fn("exp", {100.0f})[0] == inf);
  CHECK(run_fn("exp", {-110.0f})[0] == 0.0f);
  CHECK(run_fn("exp2", {-149.0f})[0] == std::ldexp(1.0f, -149));  // smallest subnormal
  CHECK(run_fn("log2", {std::ldexp(1.0f, -149)})[0] == -149.0f);
}

TEST_CASE("prelude gelu_tanh matches the double formula", "[cpu][prelude]") {
  auto x = uniform(-8.0f, 8.0f, 1 << 16, 18);
  auto y = run_fn("gelu_tanh", x);
  for (size_t i = 0; i < x.size(); ++i) {
    double v = x[i];
    double ref = 0.5 * v * (1 + std::tanh(0.7978845608028654 * (v + 0.044715 * v * v * v)));
    REQUIRE(std::abs(y[i] - ref) <= 4e-7 * std::max(1.0, std::abs(ref)));
  }
}

namespace {
double f16_value(uint16_t h) {  // independent decoder
  int e = (h >> 10) & 0x1f, m = h & 0x3ff;
  double s = (h & 0x8000) ? -1.0 : 1.0;
  if (e == 0) return s * std::ldexp(m, -24);
  if (e == 31) return m ? NAN : s * INFINITY;
  return s * std::ldexp(1024 + m, e - 25);
}
}  // namespace

TEST_CASE("f16 <-> f32 conversions are exact / round to nearest even", "[cpu][prelude]") {
  std::vector<uint16_t> all(65536);
  for (int i = 0; i < 65536; ++i) all[i] = static_cast<uint16_t>(i);
  std::vector<float> dec(65536);
  prelude_lib().function<void (*)(const uint16_t*, float*, int64_t)>("f16_from")(all.data(), dec.data(),
                                                                                 65536);
  for (int i = 0; i < 65536; ++i) {
    double v = f16_value(static_cast<uint16_t>(i));
    uint32_t got;
    std::memcpy(&got, &dec[i], 4);
    if (std::isnan(v)) {
      // A quiet NaN with the payload (IEEE 754 convertFormat; vcvtph2ps in the GEMMs).
      REQUIRE(got == ((static_cast<uint32_t>(i & 0x8000) << 16) | 0x7fc00000u |
                      (static_cast<uint32_t>(i & 0x3ff) << 13)));
    } else {
      REQUIRE(dec[i] == static_cast<float>(v));
      REQUIRE(std::signbit(dec[i]) == std::signbit(v));
    }
  }
  auto to_f16 = prelude_lib().function<void (*)(const float*, uint16_t*, int64_t)>("f16_to");
  // Round trip of every non-NaN half.
  std::vector<uint16_t> back(65536);
  to_f16(dec.data(), back.data(), 65536);
  for (int i = 0; i < 65536; ++i)
    if (!std::isnan(dec[i]))
      REQUIRE(back[i] == i);
    else
      REQUIRE(std::isnan(f16_value(back[i])));
  // Random floats over the half range, midpoints included: nearest, ties to even.
  std::vector<float> x = random_bits(1 << 18, 19, false);
  for (int i = 0; i < 65535; ++i) {  // exact midpoints between neighbouring halves
    double a = f16_value(static_cast<uint16_t>(i)), b = f16_value(static_cast<uint16_t>(i + 1));
    if (std::isfinite(a) && std::isfinite(b) && (i & 0x7fff) != 0x7bff)
      x.push_back(static_cast<float>((a + b) / 2));
  }
  std::vector<uint16_t> h(x.size());
  to_f16(x.data(), h.data(), static_cast<int64_t>(x.size()));
  for (size_t i = 0; i < x.size(); ++i) {
    double v = x[i], got = f16_value(h[i]);
    if (std::abs(v) >= 65520.0) {
      REQUIRE(std::isinf(got));
      continue;
    }
    // got is the nearest half; on a tie the even mantissa wins.
    double up = f16_value(static_cast<uint16_t>(h[i] + 1)), dn = f16_value(static_cast<uint16_t>(h[i] - 1));
    double err = std::abs(got - v);
    if ((h[i] & 0x7fff) < 0x7bff) REQUIRE(err <= std::abs(up - v));
    if ((h[i] & 0x7fff) > 0) REQUIRE(err <= std::abs(dn - v));
    if (err == std::abs(up - v) || ((h[i] & 0x7fff) > 0 && err == std::abs(dn - v)))
      if (err != 0) REQUIRE((h[i] & 1) == 0);
  }
}

TEST_CASE("bf16 <-> f32 conversions round to nearest even", "[cpu][prelude]") {
  auto from = prelude_lib().function<float (*)(uint16_t)>("bf16_from1");
  auto to = prelude_lib().function<void (*)(const float*, uint16_t*, int64_t)>("bf16_to");
  std::vector<float> x = random_bits(1 << 18, 20, false);
  x.push_back(1.0f + std::ldexp(1.0f, -8));      // tie -> even (1.0)
  x.push_back(1.0f + 3 * std::ldexp(1.0f, -8));  // tie -> even (1 + 2^-6)
  x.push_back(NAN);
  std::vector<uint16_t> h(x.size());
  to(x.data(), h.data(), static_cast<int64_t>(x.size()));
  for (size_t i = 0; i < x.size(); ++i) {
    if (std::isnan(x[i])) {
      REQUIRE(std::isnan(from(h[i])));
      continue;
    }
    uint32_t b;
    std::memcpy(&b, &x[i], 4);
    uint32_t lo = b & 0xffff0000u, hi = lo + 0x10000u;
    float flo, fhi;
    std::memcpy(&flo, &lo, 4);
    std::memcpy(&fhi, &hi, 4);
    // Above the largest bf16 the upper neighbour is 2^128 (which rounds to inf).
    double vhi = (hi & 0x7fffffffu) == 0x7f800000u ? std::copysign(std::ldexp(1.0, 128), x[i]) : fhi;
    double dl = std::abs(static_cast<double>(x[i]) - flo), dh = std::abs(vhi - x[i]);
    uint16_t expect =
        static_cast<uint16_t>((dl < dh || (dl == dh && ((lo >> 16) & 1) == 0)) ? lo >> 16 : hi >> 16);
    REQUIRE(h[i] == expect);
  }
  CHECK(h[h.size() - 3] == 0x3f80);
  CHECK(h[h.size() - 2] == 0x3f82);
}
