#include "backends/cpu/c_prelude.hpp"

namespace luminal::cpu {

namespace {

// Notes on the math (all f32, Horner with FMA when the target has it):
//  exp:  n = round(x*log2e); r = x - n*ln2 (Cody-Waite two-part ln2, exact for |n| < 2^15);
//        exp(r) = 1 + r + r^2 Q4(r) on |r| <= ln2/2, Q4 our near-minimax fit (relative
//        error 3.1e-9 before rounding the coefficients; the degree-7 Taylor polynomial it
//        replaces cost one more FMA);
//        the result is scaled by 2^n as two factors 2^(n/2) * 2^(n-n/2), so overflow
//        gives inf and underflow rounds once into the subnormals.
//  exp2: the same with n = round(x), f = x - n exact, 2^f by the Taylor series of
//        exp(f*ln2) in f (coefficients ln2^k/k!).
//  log:  x = m*2^e with m in [sqrt(1/2), sqrt(2)); log m = 2 atanh(s), s = (m-1)/(m+1),
//        |s| <= 0.1716, odd series to s^9; e*ln2 added in two parts. Subnormals are
//        scaled by 2^23 first; x<0 -> NaN, 0 -> -inf, inf -> inf.
//  sin/cos: j = round(x*2/pi), r = x - j*pi/2 in four parts (three of 11 bits: exact
//        products for |j| < 2^13, hence the stated domain |x| <= 8192; with three parts
//        the last one's rounding cost 5 ulp next to zeros near |x| = 4000), then the quadrant selects
//        the sin or cos polynomial on |r| <= pi/4 and the sign: r + r^3 P2(r^2) and
//        1 + r^2 P3(r^2), near-minimax fits (relative error 3.8e-9 and 6.4e-11), one
//        term shorter each than the Taylor polynomials they replace.
//  tanh: tanh|x| = em/(em+2) with em = expm1(2|x|) = 2^n expm1(r) + (2^n - 1) after the
//        exp reduction (expm1(r) = r P6(r), a near-minimax fit with relative error
//        2.4e-10, one term shorter than the degree-8 Taylor polynomial; both terms >= 0, so
//        there is no cancellation, also near 0); |x| > 9.5, where tanh rounds to 1,
//        gives 1; the sign is copied back. Below |x| = 0.3 the quotient's roundings
//        still reached 3.2 ulp (x = -0.0078, the accuracy test at stride 257): there the
//        odd Taylor polynomial to x^11 (truncation under 2e-9 relative) is chosen instead.
//  sigmoid: 1/(1+exp(-x)).
//  Fits (exp, sin, cos, expm1): least squares on 20000 Chebyshev nodes with relative
//        weights, then 60 Lawson reweightings toward minimax (numpy), coefficients rounded
//        to f32 (bench/cpu/prelude_fit.py prints them); tests/cpu/prelude_math_test.cpp
//        checks the resulting bounds.
//  erf:  |x| <= 1: x*P6(x^2); 1 < |x| < 4: 1 - exp(-x^2)*Q9(1/|x|); P and Q are our
//        least-squares fits on Chebyshev nodes (bench-free: regenerate with numpy
//        polyfit of erf(x)/x and erfc(x)exp(x^2)); |x| >= 4 rounds to 1.
const char* kPrelude = R"LMC(
/* ---- Luminal C prelude ---- */
#include <stdint.h>
#include <stddef.h>
#define LM_INLINE static inline __attribute__((always_inline))
#define LM_RESTRICT restrict
#if defined(__FMA__) || defined(__AVX512F__)
#define LM_FMA(a, b, c) __builtin_fmaf((a), (b), (c))
#else
#define LM_FMA(a, b, c) ((a) * (b) + (c))
#endif

LM_INLINE uint32_t lm_f2u(float x) { uint32_t u; __builtin_memcpy(&u, &x, 4); return u; }
LM_INLINE float lm_u2f(uint32_t u) { float x; __builtin_memcpy(&x, &u, 4); return x; }

/* round-to-nearest integer of |x| < 2^22 without float->int conversion (no UB on NaN) */
#define LM_MAGIC 12582912.0f
LM_INLINE float lm_rint(float x) { return (x + LM_MAGIC) - LM_MAGIC; }
LM_INLINE int32_t lm_rint_i(float x) { return (int32_t)(lm_f2u(x + LM_MAGIC) - lm_f2u(LM_MAGIC)); }

/* p * 2^n for n in [-252, 254]; two factors keep each one a normal float */
LM_INLINE float lm_ldexp(float p, int32_t n) {
  int32_t n1 = n >> 1; /* arithmetic shift (gcc, clang): floor(n/2) */
  uint32_t n2 = (uint32_t)n - (uint32_t)n1;
  float s1 = lm_u2f(((uint32_t)n1 + 127u) << 23);
  float s2 = lm_u2f((n2 + 127u) << 23);
  return (p * s1) * s2;
}

LM_INLINE float lm_exp(float x) {
  /* no clamp of x up front: GCC threads a clamped constant through the whole body and
     if-converts the copies (~40 instructions instead of ~26); out-of-range x give a
     finite garbage n (no UB: unsigned arithmetic) and are replaced at the end */
  float t = x * 1.44269504088896341f;
  float nf = lm_rint(t);
  int32_t n = lm_rint_i(t);
  float r = LM_FMA(nf, -0.693359375f, x);
  r = LM_FMA(nf, 2.12194440e-4f, r);
  float p = 1.38146104e-3f;
  p = LM_FMA(p, r, 8.36871006e-3f);
  p = LM_FMA(p, r, 4.16683890e-2f);
  p = LM_FMA(p, r, 1.66665211e-1f);
  p = LM_FMA(p, r, 4.99999940e-1f);
  p = LM_FMA(p, r, 1.0f);
  p = LM_FMA(p, r, 1.0f);
  float e = lm_ldexp(p, n);
  e = x > 89.0f ? __builtin_inff() : e;
  return x < -104.0f ? 0.0f : e;
}

LM_INLINE float lm_exp2(float x) {
  float nf = lm_rint(x);
  int32_t n = lm_rint_i(x);
  float f = x - nf;
  float p = 1.52527338e-5f;
  p = LM_FMA(p, f, 1.54035304e-4f);
  p = LM_FMA(p, f, 1.33335581e-3f);
  p = LM_FMA(p, f, 9.61812911e-3f);
  p = LM_FMA(p, f, 5.55041087e-2f);
  p = LM_FMA(p, f, 2.40226507e-1f);
  p = LM_FMA(p, f, 6.93147181e-1f);
  p = LM_FMA(p, f, 1.0f);
  float e = lm_ldexp(p, n); /* out-of-range x replaced below (see lm_exp) */
  e = x > 129.0f ? __builtin_inff() : e;
  return x < -151.0f ? 0.0f : e;
}

/* log(m) - e*ln2 split: returns log(m) for m in [sqrt(.5), sqrt(2)), exponent in *e */
LM_INLINE float lm_log_reduce(float x, float* ef) {
  int sub = x < 1.17549435e-38f;
  float xs = sub ? x * 8388608.0f : x;
  uint32_t b = lm_f2u(xs);
  int32_t e = (int32_t)((b >> 23) & 0xffu) - 127 - (sub ? 23 : 0);
  float m = lm_u2f((b & 0x007fffffu) | 0x3f800000u);
  int big = m > 1.41421356f;
  m = big ? m * 0.5f : m;
  e = big ? e + 1 : e;
  float s = (m - 1.0f) / (m + 1.0f);
  float s2 = s * s;
  float p = 2.0f / 9.0f;
  p = LM_FMA(p, s2, 2.0f / 7.0f);
  p = LM_FMA(p, s2, 2.0f / 5.0f);
  p = LM_FMA(p, s2, 2.0f / 3.0f);
  *ef = (float)e;
  return LM_FMA(s * s2, p, 2.0f * s);
}

LM_INLINE float lm_log_special(float x, float r) {
  r = x == __builtin_inff() ? x : r;
  r = x < 0.0f ? __builtin_nanf("") : r;
  r = x == 0.0f ? -__builtin_inff() : r;
  return x != x ? x : r;
}

LM_INLINE float lm_log(float x) {
  float ef;
  float lm = lm_log_reduce(x, &ef);
  float r = LM_FMA(ef, 0.693359375f, LM_FMA(ef, -2.12194440e-4f, lm));
  return lm_log_special(x, r);
}

LM_INLINE float lm_log2(float x) {
  float ef;
  float lm = lm_log_reduce(x, &ef);
  float r = LM_FMA(lm, 1.44269504088896341f, ef);
  return lm_log_special(x, r);
}

LM_INLINE float lm_sin_poly(float r, float r2) {
  float p = -1.95152839e-4f;
  p = LM_FMA(p, r2, 8.33216123e-3f);
  p = LM_FMA(p, r2, -1.66666552e-1f);
  return LM_FMA(r * r2, p, r);
}

LM_INLINE float lm_cos_poly(float r2) {
  float p = 2.43835675e-5f;
  p = LM_FMA(p, r2, -1.38866820e-3f);
  p = LM_FMA(p, r2, 4.16666195e-2f);
  p = LM_FMA(p, r2, -0.5f);
  return LM_FMA(p, r2, 1.0f);
}

/* quadrant q of x and the reduced argument r = x - q*pi/2 */
LM_INLINE float lm_trig_reduce(float x, int32_t* q) {
  float t = x * 0.636619772367581343f;
  float jf = lm_rint(t);
  *q = lm_rint_i(t);
  float r = LM_FMA(jf, -1.5703125f, x);
  r = LM_FMA(jf, -4.837512969970703125e-4f, r);
  r = LM_FMA(jf, -7.549533620476723e-8f, r);
  r = LM_FMA(jf, -2.5633440682570896e-12f, r);
  return r;
}

/* The bound |v| <= 1 (only reachable for |x| > 2^22) and the sign are set on the bits: a
   float clamp here cost a third of the function (15.1 vs 12.4 cycles per 16 floats). A
   non-finite x makes r NaN, and x - x puts the NaN back after the integer clamp. */
LM_INLINE float lm_trig_finish(float r, int32_t q, float x) {
  float r2 = r * r;
  float s = lm_sin_poly(r, r2), c = lm_cos_poly(r2);
  float v = (q & 1) ? c : s;
  uint32_t b = lm_f2u(v);
  uint32_t m = b & 0x7fffffffu;
  m = m < 0x3f800000u ? m : 0x3f800000u;
  uint32_t sign = (b & 0x80000000u) ^ (((uint32_t)q & 2u) << 30); /* -v in quadrants 2, 3 */
  uint32_t nan = lm_f2u(x - x) & 0x7fc00000u;
  return lm_u2f(m | sign | nan);
}

LM_INLINE float lm_sin(float x) { int32_t q; float r = lm_trig_reduce(x, &q); return lm_trig_finish(r, q, x); }
LM_INLINE float lm_cos(float x) { int32_t q; float r = lm_trig_reduce(x, &q); return lm_trig_finish(r, q + 1, x); }

LM_INLINE float lm_tanh(float x) {
  uint32_t sign = lm_f2u(x) & 0x80000000u;
  float a = lm_u2f(lm_f2u(x) & 0x7fffffffu);
  float y = 2.0f * a; /* a > 9.5 (tanh rounds to 1) is replaced at the end, as in lm_exp */
  /* em = expm1(y), y in [0, 19]: y = n ln2 + r, expm1(r) by its Taylor polynomial,
     em = 2^n expm1(r) + (2^n - 1): both terms >= 0, so no cancellation anywhere */
  float t = y * 1.44269504088896341f;
  float nf = lm_rint(t);
  int32_t n = lm_rint_i(t);
  float r = LM_FMA(nf, -0.693359375f, y);
  r = LM_FMA(nf, 2.12194440e-4f, r);
  float p = 1.98458758e-4f;
  p = LM_FMA(p, r, 1.39406172e-3f);
  p = LM_FMA(p, r, 8.33338965e-3f);
  p = LM_FMA(p, r, 4.16663624e-2f);
  p = LM_FMA(p, r, 1.66666657e-1f);
  p = LM_FMA(p, r, 0.5f);
  p = LM_FMA(p, r, 1.0f);
  p = p * r;
  float sc = lm_u2f((uint32_t)(n + 127) << 23);
  float em = LM_FMA(sc, p, sc - 1.0f);
  float q = em / (em + 2.0f);
  q = a > 9.5f ? 1.0f : q;
  /* below 0.3 the quotient's roundings reach 3.2 ulp (near x = 0.0078); the Taylor
     polynomial to x^11 there (truncation under 2e-9 relative) stays near 1 */
  float x2 = x * x;
  float s = -8.86323552e-3f; /* -1382/155925 */
  s = LM_FMA(s, x2, 2.18694885e-2f);  /* 62/2835 */
  s = LM_FMA(s, x2, -5.39682540e-2f); /* -17/315 */
  s = LM_FMA(s, x2, 1.33333333e-1f);  /* 2/15 */
  s = LM_FMA(s, x2, -3.33333333e-1f); /* -1/3 */
  float small = LM_FMA(x * x2, s, x);
  return a < 0.3f ? small : lm_u2f(lm_f2u(q) | sign);
}

LM_INLINE float lm_sigmoid(float x) { return 1.0f / (1.0f + lm_exp(-x)); }

LM_INLINE float lm_erf(float x) {
  uint32_t sign = lm_f2u(x) & 0x80000000u;
  float a = lm_u2f(lm_f2u(x) & 0x7fffffffu);
  float a2 = a * a;
  float p = 7.933493902e-05f;
  p = LM_FMA(p, a2, -8.034846654e-04f);
  p = LM_FMA(p, a2, 5.191218378e-03f);
  p = LM_FMA(p, a2, -2.685539945e-02f);
  p = LM_FMA(p, a2, 1.128362573e-01f);
  p = LM_FMA(p, a2, -3.761262988e-01f);
  p = LM_FMA(p, a2, 1.128379167f);
  float small = a * p;
  float b = a < 1.0f ? 1.0f : a;
  b = b > 4.0f ? 4.0f : b;
  float t = 1.0f / b;
  float q = 2.995467383e-02f;
  q = LM_FMA(q, t, -1.748546339e-01f);
  q = LM_FMA(q, t, 4.249329736e-01f);
  q = LM_FMA(q, t, -5.164400367e-01f);
  q = LM_FMA(q, t, 2.187259632e-01f);
  q = LM_FMA(q, t, 2.424559174e-01f);
  q = LM_FMA(q, t, -3.806347312e-01f);
  q = LM_FMA(q, t, 2.170641977e-02f);
  q = LM_FMA(q, t, 5.616064094e-01f);
  q = LM_FMA(q, t, 1.306367525e-04f);
  float big = 1.0f - lm_exp(-(b * b)) * q;
  float r = a <= 1.0f ? small : big;
  return lm_u2f(lm_f2u(r) | sign);
}

LM_INLINE float lm_relu(float x) { return x < 0.0f ? 0.0f : x; }
LM_INLINE float lm_sqrt(float x) { return __builtin_sqrtf(x); }
LM_INLINE float lm_abs(float x) { return lm_u2f(lm_f2u(x) & 0x7fffffffu); }
LM_INLINE float lm_max(float a, float b) { return (a > b || a != a) ? a : b; }
LM_INLINE float lm_min(float a, float b) { return (a < b || a != a) ? a : b; }
/* Python/torch remainder: the result has the sign of the divisor */
LM_INLINE float lm_fmod_floor(float a, float b) {
  float r = a - b * __builtin_floorf(a / b);
  return r;
}
LM_INLINE int32_t lm_imod_floor(int32_t a, int32_t b) {
  if (b == -1) return 0; /* INT32_MIN % -1 traps on x86 (the quotient overflows) */
  int32_t r = a % b;
  return (r != 0 && ((r < 0) != (b < 0))) ? r + b : r;
}
/* gelu, tanh form: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) */
LM_INLINE float lm_gelu_tanh(float x) {
  float u = 0.797884560802865356f * (x + 0.044715f * x * x * x);
  return 0.5f * x * (1.0f + lm_tanh(u));
}

/* ---- f16 / bf16 storage conversions (round to nearest even, NaN kept quiet) ---- */
/* f16 -> f32 is exact; a signaling NaN comes back quiet with its payload (IEEE 754's
   convertFormat, F16C's vcvtph2ps, PyTorch), so this and the GEMMs' vcvtph2ps agree */
LM_INLINE float lm_f16_to_f32(uint16_t h) {
  uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
  uint32_t em = h & 0x7fffu;
  uint32_t r = lm_f2u(lm_u2f(em << 13) * 0x1p112f); /* normals and subnormals, exact */
  r = em >= 0x7c00u ? (0x7f800000u | ((em & 0x3ffu) << 13) | (em > 0x7c00u ? 0x400000u : 0u)) : r;
  return lm_u2f(r | sign);
}

LM_INLINE uint16_t lm_f32_to_f16(float f) {
  uint32_t x = lm_f2u(f);
  uint32_t sign = (x >> 16) & 0x8000u;
  uint32_t ax = x & 0x7fffffffu;
  /* subnormal results: let the FPU round by adding 0.5f (2^-1: its ulp is 2^-24) */
  uint32_t sub = lm_f2u(lm_u2f(ax) + 0.5f) - 0x3f000000u;
  /* normal results: rebias, round half to even on the 13 dropped bits */
  uint32_t odd = (ax >> 13) & 1u;
  uint32_t nrm = (ax + 0xc8000fffu + odd) >> 13; /* 0xc8000fff = (15-127)<<23 + 0xfff */
  uint32_t r = ax < 0x38800000u ? sub : nrm;
  r = ax >= 0x477ff000u ? 0x7c00u : r;                          /* overflow -> inf */
  r = ax > 0x7f800000u ? (0x7e00u | ((ax >> 13) & 0x3ffu)) : r; /* NaN stays NaN */
  return (uint16_t)(r | sign);
}

LM_INLINE float lm_bf16_to_f32(uint16_t h) { return lm_u2f((uint32_t)h << 16); }

LM_INLINE uint16_t lm_f32_to_bf16(float f) {
  uint32_t x = lm_f2u(f);
  uint32_t r = (x + 0x7fffu + ((x >> 16) & 1u)) >> 16;
  r = (x & 0x7fffffffu) > 0x7f800000u ? ((x >> 16) | 0x40u) : r;
  return (uint16_t)r;
}
/* ---- end of prelude ---- */
)LMC";

}  // namespace

const std::string& c_prelude() {
  static const std::string s = kPrelude;
  return s;
}

}  // namespace luminal::cpu
