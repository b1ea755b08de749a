#include "backends/gpu/gpu_prelude.hpp"

#include <sstream>

#include "backends/cpu/c_prelude.hpp"

namespace luminal::gpu {

namespace {

// Types and the C prelude's compiler builtins, spelled for NVRTC (which declares neither
// <stdint.h> nor GCC's __builtin_* math).
const char* kCudaPart = R"LMCU(
/* ---- Luminal device prelude: CUDA ---- */
typedef signed char int8_t;
typedef unsigned char uint8_t;
typedef unsigned short uint16_t;
typedef int int32_t;
typedef unsigned int uint32_t;
typedef long long int64_t;
typedef unsigned long long uint64_t;
#define LM_INLINE static __device__ __forceinline__
#define LM_DEVICE static __device__ __forceinline__
#define LM_FMA(a, b, c) __fmaf_rn((a), (b), (c))
LM_DEVICE void lm_copy4(uint32_t* d, const float* s) { *d = __float_as_uint(*s); }
LM_DEVICE void lm_copy4(float* d, const uint32_t* s) { *d = __uint_as_float(*s); }
#define __builtin_memcpy(d, s, n) lm_copy4((d), (s))
#define __builtin_sqrtf(x) __fsqrt_rn(x)
#define __builtin_floorf(x) floorf(x)
#define __builtin_inff() __int_as_float(0x7f800000)
#define __builtin_nanf(s) __int_as_float(0x7fc00000)
LM_DEVICE void lm_sync() { __syncthreads(); }
LM_DEVICE float lm_shfl_xor_f32(float v, int m) { return __shfl_xor_sync(0xffffffffu, v, m); }
LM_DEVICE int32_t lm_shfl_xor_i32(int32_t v, int m) { return __shfl_xor_sync(0xffffffffu, v, m); }
LM_DEVICE void lm_atomic_add_f32(float* p, float v) { atomicAdd(p, v); }
/* The old value; with lm_threadfence before it, a block's earlier stores are visible to
   the block that sees the count it leaves (a split attention's last range block). */
LM_DEVICE int32_t lm_atomic_add_i32(int32_t* p, int32_t v) { return atomicAdd((int*)p, (int)v); }
LM_DEVICE void lm_threadfence() { __threadfence(); }
struct alignas(16) lm_u32x4 {
  uint32_t x, y, z, w;
};
LM_DEVICE int lm_aligned16(const void* p) { return ((uint64_t)p & 15u) == 0; }
LM_DEVICE lm_u32x4 lm_ld128(const void* p) { return *(const lm_u32x4*)p; }
struct alignas(8) lm_u32x2 {
  uint32_t x, y;
};
LM_DEVICE int lm_aligned8(const void* p) { return ((uint64_t)p & 7u) == 0; }
LM_DEVICE lm_u32x2 lm_ld64(const void* p) { return *(const lm_u32x2*)p; }
struct alignas(16) lm_f32x4 {
  float x, y, z, w;
};
/* 4 floats of shared memory in one 16-byte load; p 16-byte aligned. */
LM_DEVICE lm_f32x4 lm_lds128f(const float* p) { return *(const lm_f32x4*)p; }
)LMCU";

// f16/bf16 storage conversions in one instruction each (every CUDA arch here is sm_80
// or later: cvt.rn.bf16.f32 needs it). The C prelude's branch-free versions take 8 (f16
// -> f32) and 15 (f32 -> f16) integer instructions: in an elementwise chain over halves,
// where every op rounds its result as PyTorch does, they were half of the kernel's
// instructions. Round to nearest even as those, so the same bits for every value but a
// NaN: the hardware returns its canonical NaN where the C prelude (and the emulator, which
// keeps it) returns the input's payload, quieted.
const char* kCudaHalf = R"LMCU(
LM_INLINE float lm_f16_to_f32(uint16_t h) {
  float f;
  asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h));
  return f;
}
LM_INLINE uint16_t lm_f32_to_f16(float f) {
  uint16_t h;
  asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f));
  return h;
}
LM_INLINE uint16_t lm_f32_to_bf16(float f) {
  uint16_t h;
  asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(h) : "f"(f));
  return h;
}
)LMCU";

// Fast math (a plan compiled with fast_math: Program::approximate_math): f32 exp2, exp,
// log2, sin, sqrt and 1/x on the special function units -- one MUFU instruction each
// (16 a clock per SM on sm_80-sm_100, against 23-35 instructions for the exact
// polynomials), subnormal inputs and results flushed to zero. exp is ex2 of x log2(e), as
// CUDA's __expf; sin.approx is accurate on [-pi, pi] only (about 2^-21 absolute), so sin first
// takes x modulo 2 pi in two FMAs (Cody-Waite), which holds the error near that bound for
// |x| up to about 1e5 (an f16's whole range). The emulator's definitions
// (emulated_fast_math) compute the same formulas with the exact functions.
const char* kCudaFast = R"LMCU(
/* One f32 PTX instruction of one operand as a function. */
#define LM_PTX_F32(NAME, INSTR) \
  LM_DEVICE float NAME(float x) { \
    float y; \
    asm(INSTR " %0, %1;" : "=f"(y) : "f"(x)); \
    return y; \
  }
LM_PTX_F32(lm_fast_exp2, "ex2.approx.ftz.f32")
LM_PTX_F32(lm_fast_log2, "lg2.approx.ftz.f32")
LM_PTX_F32(lm_fast_rcp, "rcp.approx.ftz.f32")
LM_PTX_F32(lm_fast_sqrt, "sqrt.approx.ftz.f32")
LM_PTX_F32(lm_rint_f32, "cvt.rni.f32.f32")
LM_PTX_F32(lm_sin_approx, "sin.approx.ftz.f32")
LM_DEVICE float lm_fast_exp(float x) { return lm_fast_exp2(x * 1.44269504f); }
LM_DEVICE float lm_fast_sin(float x) {
  const float k = lm_rint_f32(x * 0.159154943f);
  return lm_sin_approx(__fmaf_rn(k, 1.74845553e-7f, __fmaf_rn(k, -6.28318548f, x)));
}
)LMCU";

// tanh under fast math, one formula for the device and the emulator (`F2U`, `U2F`: their
// bit casts). |x| < 0.3 by its Taylor polynomial to x^11 (truncation under 2e-9
// relative; lm_tanh's own branch there, c_prelude.cpp), else 1 - 2 / (e^(2|x|) + 1) on the
// special function units (ex2, rcp), which is exactly 1 once e^(2|x|) overflows; the
// subtraction amplifies the units' error at most 2.4 times (at 0.3). 16 instructions and 2
// MUFU, where the exact lm_tanh is 37 PTX instructions with an IEEE division; the cost
// model prices it so (TargetDesc::fast_tanh_flops).
const char* kFastTanh = R"LMFT(
LM_INLINE float lm_fast_tanh(float x) {
  const uint32_t s = F2U(x) & 0x80000000u;
  const float a = U2F(F2U(x) ^ s);
  const float big = LM_FMA(-2.0f, lm_fast_rcp(lm_fast_exp2(a * 2.88539008f) + 1.0f), 1.0f);
  const float x2 = x * x;
  float p = -8.86323552e-3f;         /* -1382/155925 */
  p = LM_FMA(p, x2, 2.18694885e-2f);  /* 62/2835 */
  p = LM_FMA(p, x2, -5.39682540e-2f); /* -17/315 */
  p = LM_FMA(p, x2, 1.33333333e-1f);  /* 2/15 */
  p = LM_FMA(p, x2, -3.33333333e-1f); /* -1/3 */
  const float small = LM_FMA(x * x2, p, x);
  return a < 0.3f ? small : U2F(F2U(big) | s);
}
)LMFT";

std::string fast_tanh(const std::string& f2u, const std::string& u2f) {
  std::string s = kFastTanh;
  for (auto [from, to] :
       {std::pair{std::string("F2U("), f2u + "("}, std::pair{std::string("U2F("), u2f + "("}})
    for (size_t at = s.find(from); at != std::string::npos; at = s.find(from, at + to.size()))
      s.replace(at, from.size(), to);
  return s;
}

// HIP keeps the exact functions under fast math (allowed: an approximation may be exact).
const char* kHipFast = R"LMHIP(
#define lm_fast_exp2(x) lm_exp2(x)
#define lm_fast_exp(x) lm_exp(x)
#define lm_fast_log2(x) lm_log2(x)
#define lm_fast_rcp(x) (1.0f / (x))
#define lm_fast_sqrt(x) lm_sqrt(x)
#define lm_fast_sin(x) lm_sin(x)
#define lm_fast_tanh(x) lm_tanh(x)
)LMHIP";

// The emulator's: kCudaFast's formulas with exact functions, subnormals flushed as there
// (after the common code, which defines lm_exp2 and the others).
const char* kEmulatedFast = R"LMEM(
/* ---- fast math: the device's special-function formulas, exact functions ---- */
LM_INLINE float lm_emu_ftz(float x) { return (x != 0.0f && __builtin_fabsf(x) < 1.17549435e-38f) ? x * 0.0f : x; }
LM_INLINE float lm_fast_exp2(float x) { return lm_emu_ftz(lm_exp2(lm_emu_ftz(x))); }
LM_INLINE float lm_fast_exp(float x) { return lm_fast_exp2(x * 1.44269504f); }
LM_INLINE float lm_fast_log2(float x) { return lm_emu_ftz(lm_log2(lm_emu_ftz(x))); }
LM_INLINE float lm_fast_rcp(float x) { return lm_emu_ftz(1.0f / lm_emu_ftz(x)); }
LM_INLINE float lm_fast_sqrt(float x) { return lm_emu_ftz(lm_sqrt(lm_emu_ftz(x))); }
LM_INLINE float lm_fast_sin(float x) {
  const float k = __builtin_rintf(x * 0.159154943f);
  const float r = __builtin_fmaf(k, 1.74845553e-7f, __builtin_fmaf(k, -6.28318548f, x));
  return lm_emu_ftz(lm_sin(lm_emu_ftz(r)));
}
)LMEM";

const char* kCudaMma = R"LMCU(
LM_DEVICE void lm_mma_m16n8k16_f16(float* d, const uint32_t* a, const uint32_t* b, const float* c) {
  asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%10,%11,%12,%13};\n"
               : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]),
                 "f"(c[0]), "f"(c[1]), "f"(c[2]), "f"(c[3]));
}
LM_DEVICE void lm_mma_m16n8k16_bf16(float* d, const uint32_t* a, const uint32_t* b, const float* c) {
  asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%10,%11,%12,%13};\n"
               : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]),
                 "f"(c[0]), "f"(c[1]), "f"(c[2]), "f"(c[3]));
}
)LMCU";

// ldmatrix and cp.async (sm_80+; layouts in gpu_prelude.hpp). Shared addresses are the
// 32-bit offsets both instructions take, converted from the generic pointer with cvta
// (no header declares __cvta_generic_to_shared here). The global source of cp.async is
// the generic address, which is the global one on every CUDA GPU. wait_group takes its
// count as an immediate: a template argument.
const char* kCudaAsync = R"LMCU(
LM_DEVICE uint32_t lm_smem_u32(const void* p) {
  uint32_t a;
  asm("{ .reg .u64 lm_t; cvta.to.shared.u64 lm_t, %1; cvt.u32.u64 %0, lm_t; }" : "=r"(a) : "l"(p));
  return a;
}
LM_DEVICE void lm_ldmatrix_x4(uint32_t* r, const uint16_t* row) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(lm_smem_u32(row)));
}
LM_DEVICE void lm_ldmatrix_x4_trans(uint32_t* r, const uint16_t* row) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(lm_smem_u32(row)));
}
LM_DEVICE void lm_cp_async16(uint16_t* dst, const uint16_t* src, int src_bytes) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(lm_smem_u32(dst)), "l"(src), "r"(src_bytes)
               : "memory");
}
LM_DEVICE void lm_cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
template <int N>
LM_DEVICE void lm_cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}
)LMCU";

// On AMD the f16 conversions through _Float16: v_cvt_f16_f32 / v_cvt_f32_f16, round to
// nearest even with f16 denormals kept (hipRTC's kernels run with both denormal modes
// "preserve" and IEEE mode on; checked in the code object's descriptor for gfx90a).
// CDNA2 has no f32 -> bf16 instruction: bf16 keeps the C prelude's rounding.
const char* kHipHalf = R"LMHIP(
LM_INLINE float lm_f16_to_f32(uint16_t h) { return (float)__builtin_bit_cast(_Float16, h); }
LM_INLINE uint16_t lm_f32_to_f16(float f) { return __builtin_bit_cast(uint16_t, (_Float16)f); }
)LMHIP";

// MFMA through the compiler's builtins (hipRTC 5.2 has them for gfx908/gfx90a): the
// fragments are our 32-bit words reinterpreted as the builtins' vector types.
const char* kHipMfma = R"LMHIP(
typedef _Float16 lm_h4 __attribute__((ext_vector_type(4)));
typedef float lm_f4 __attribute__((ext_vector_type(4)));
LM_DEVICE void lm_mfma_16x16x16_f16(float* d, const uint32_t* a, const uint32_t* b, const float* c) {
  union { uint32_t w[2]; lm_h4 v; } x, y;
  x.w[0] = a[0]; x.w[1] = a[1]; y.w[0] = b[0]; y.w[1] = b[1];
  lm_f4 acc = {c[0], c[1], c[2], c[3]};
  acc = __builtin_amdgcn_mfma_f32_16x16x16f16(x.v, y.v, acc, 0, 0, 0);
  d[0] = acc[0]; d[1] = acc[1]; d[2] = acc[2]; d[3] = acc[3];
}
)LMHIP";
const char* kHipMfmaBf16 = R"LMHIP(
typedef short lm_s4 __attribute__((ext_vector_type(4)));
LM_DEVICE void lm_mfma_16x16x16_bf16(float* d, const uint32_t* a, const uint32_t* b, const float* c) {
  union { uint32_t w[2]; lm_s4 v; } x, y;
  x.w[0] = a[0]; x.w[1] = a[1]; y.w[0] = b[0]; y.w[1] = b[1];
  lm_f4 acc = {c[0], c[1], c[2], c[3]};
  acc = __builtin_amdgcn_mfma_f32_16x16x16bf16_1k(x.v, y.v, acc, 0, 0, 0);
  d[0] = acc[0]; d[1] = acc[1]; d[2] = acc[2]; d[3] = acc[3];
}
)LMHIP";

// gfx908 has no bf16_1k MFMA (LLVM aborts the process when asked to select it); its
// v_mfma_f32_16x16x8bf16 takes two bf16 per lane, lane (g, r) holding k = 2g, 2g + 1 of
// an 8-deep product. Our layout gives lane (g, r) k = 4g..4g+3 (gpu_prelude.hpp); the
// same 16 products result when the first call takes every lane's first word (k 4g,
// 4g + 1) and the second its second word (k 4g + 2, 4g + 3): A and B relabel k alike,
// and a sum over k does not care which instruction added which pair. The accumulator
// layout of the two forms is the same (C/D[4g + q][r]).
const char* kHipMfmaBf16Gfx908 = R"LMHIP(
typedef short lm_s2 __attribute__((ext_vector_type(2)));
LM_DEVICE void lm_mfma_16x16x16_bf16(float* d, const uint32_t* a, const uint32_t* b, const float* c) {
  union { uint32_t w; lm_s2 v; } x0, x1, y0, y1;
  x0.w = a[0]; x1.w = a[1]; y0.w = b[0]; y1.w = b[1];
  lm_f4 acc = {c[0], c[1], c[2], c[3]};
  acc = __builtin_amdgcn_mfma_f32_16x16x8bf16(x0.v, y0.v, acc, 0, 0, 0);
  acc = __builtin_amdgcn_mfma_f32_16x16x8bf16(x1.v, y1.v, acc, 0, 0, 0);
  d[0] = acc[0]; d[1] = acc[1]; d[2] = acc[2]; d[3] = acc[3];
}
)LMHIP";

// RDNA3's WMMA through the compiler's builtins (LLVM 15 and later know gfx11; ROCm 5.2's
// comgr does not, so hipRTC from ROCm 5.4 on compiles these): a lane's eight words are
// the 16 halves of its row of A (column of B), reinterpreted as the builtin's vector.
const char* kHipWmma = R"LMHIP(
typedef _Float16 lm_h16 __attribute__((ext_vector_type(16)));
typedef short lm_s16 __attribute__((ext_vector_type(16)));
typedef float lm_f8 __attribute__((ext_vector_type(8)));
LM_DEVICE void lm_wmma_16x16x16_f16(float* d, const uint32_t* a, const uint32_t* b, const float* c) {
  union { uint32_t w[8]; lm_h16 v; } x, y;
  lm_f8 acc;
  for (int i = 0; i < 8; ++i) { x.w[i] = a[i]; y.w[i] = b[i]; acc[i] = c[i]; }
  acc = __builtin_amdgcn_wmma_f32_16x16x16_f16_w32(x.v, y.v, acc);
  for (int i = 0; i < 8; ++i) d[i] = acc[i];
}
LM_DEVICE void lm_wmma_16x16x16_bf16(float* d, const uint32_t* a, const uint32_t* b, const float* c) {
  union { uint32_t w[8]; lm_s16 v; } x, y;
  lm_f8 acc;
  for (int i = 0; i < 8; ++i) { x.w[i] = a[i]; y.w[i] = b[i]; acc[i] = c[i]; }
  acc = __builtin_amdgcn_wmma_f32_16x16x16_bf16_w32(x.v, y.v, acc);
  for (int i = 0; i < 8; ++i) d[i] = acc[i];
}
)LMHIP";

// hipRTC pre-includes hip_runtime.h (fixed-width integer types, warpSize, the
// __shfl_xor overloads); a wavefront is 64 lanes on CDNA and 32 on RDNA.
const char* kHipPart = R"LMHIP(
/* ---- Luminal device prelude: HIP ---- */
/* hipRTC 5.2 declares the 32- and 64-bit integer types only; repeating a typedef with
   the same type is legal C++, so these hold whichever hipRTC compiles them */
typedef unsigned short uint16_t;
typedef unsigned char uint8_t;
typedef signed char int8_t;
#define LM_INLINE static __device__ __forceinline__
#define LM_DEVICE static __device__ __forceinline__
#define LM_FMA(a, b, c) __builtin_fmaf((a), (b), (c))
LM_DEVICE void lm_sync() { __syncthreads(); }
LM_DEVICE float lm_shfl_xor_f32(float v, int m) { return __shfl_xor(v, m, LM_WARP); }
LM_DEVICE int32_t lm_shfl_xor_i32(int32_t v, int m) { return __shfl_xor(v, m, LM_WARP); }
LM_DEVICE void lm_atomic_add_f32(float* p, float v) { atomicAdd(p, v); }
/* The old value; with lm_threadfence before it, a block's earlier stores are visible to
   the block that sees the count it leaves (a split attention's last range block). */
LM_DEVICE int32_t lm_atomic_add_i32(int32_t* p, int32_t v) { return atomicAdd((int*)p, (int)v); }
LM_DEVICE void lm_threadfence() { __threadfence(); }
struct alignas(16) lm_u32x4 {
  uint32_t x, y, z, w;
};
LM_DEVICE int lm_aligned16(const void* p) { return ((uint64_t)p & 15u) == 0; }
LM_DEVICE lm_u32x4 lm_ld128(const void* p) { return *(const lm_u32x4*)p; }
struct alignas(8) lm_u32x2 {
  uint32_t x, y;
};
LM_DEVICE int lm_aligned8(const void* p) { return ((uint64_t)p & 7u) == 0; }
LM_DEVICE lm_u32x2 lm_ld64(const void* p) { return *(const lm_u32x2*)p; }
struct alignas(16) lm_f32x4 {
  float x, y, z, w;
};
/* 4 floats of shared memory in one 16-byte load; p 16-byte aligned. */
LM_DEVICE lm_f32x4 lm_lds128f(const float* p) { return *(const lm_f32x4*)p; }
)LMHIP";

// Integer helpers and reductions: the same text on the device and in the emulator.
const char* kCommon = R"LMCM(
/* ---- index arithmetic (int64, floor semantics as Python) ---- */
LM_INLINE int64_t lm_fdiv(int64_t a, int64_t b) {
  int64_t q = a / b;
  return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
}
LM_INLINE int64_t lm_fmod_i(int64_t a, int64_t b) { return a - lm_fdiv(a, b) * b; }
LM_INLINE int64_t lm_imin(int64_t a, int64_t b) { return a < b ? a : b; }
LM_INLINE int64_t lm_imax(int64_t a, int64_t b) { return a > b ? a : b; }
/* ---- i32 values: two's complement wrap-around like PyTorch, never signed-overflow UB ---- */
LM_INLINE int32_t lm_iadd(int32_t a, int32_t b) { return (int32_t)((uint32_t)a + (uint32_t)b); }
LM_INLINE int32_t lm_isub(int32_t a, int32_t b) { return (int32_t)((uint32_t)a - (uint32_t)b); }
LM_INLINE int32_t lm_imul(int32_t a, int32_t b) { return (int32_t)((uint32_t)a * (uint32_t)b); }
LM_INLINE int32_t lm_ineg(int32_t a) { return (int32_t)(0u - (uint32_t)a); }
LM_INLINE int32_t lm_idiv(int32_t a, int32_t b) { return b == 0 ? 0 : b == -1 ? lm_ineg(a) : a / b; }
LM_INLINE int32_t lm_imod(int32_t a, int32_t b) { return (b == 0 || b == -1) ? 0 : lm_imod_floor(a, b); }
/* f32 -> i32: truncate, NaN -> 0, saturate (a plain conversion is undefined out of range) */
LM_INLINE int32_t lm_f2i(float x) {
  return x != x ? 0 : x >= 2147483648.0f ? 2147483647 : x <= -2147483648.0f ? (-2147483647 - 1) : (int32_t)x;
}
/* ---- warp and block reductions (helpers only; every thread of the block calls the
   block forms, every lane of the warp the warp forms) ---- */
LM_DEVICE float lm_warp_sum_f32(float v) {
  for (int m = LM_WARP / 2; m > 0; m >>= 1) v = v + lm_shfl_xor_f32(v, m);
  return v;
}
LM_DEVICE float lm_warp_max_f32(float v) {
  for (int m = LM_WARP / 2; m > 0; m >>= 1) v = lm_max(v, lm_shfl_xor_f32(v, m));
  return v;
}
LM_DEVICE int32_t lm_warp_sum_i32(int32_t v) {
  for (int m = LM_WARP / 2; m > 0; m >>= 1) v = lm_iadd(v, lm_shfl_xor_i32(v, m));
  return v;
}
LM_DEVICE int32_t lm_warp_max_i32(int32_t v) {
  for (int m = LM_WARP / 2; m > 0; m >>= 1) {
    int32_t o = lm_shfl_xor_i32(v, m);
    v = o > v ? o : v;
  }
  return v;
}
/* Block-wide: every warp reduces, lane 0 writes its partial to sh[warp]; after the
   barrier every warp reduces all partials (blockDim.x / LM_WARP <= LM_WARP), so every
   thread holds the same result; the second barrier lets the caller reuse sh. */
#define LM_BLOCK_REDUCE(NAME, T, WARP_OP, IDENT)                              \
  LM_DEVICE T NAME(T v, T* sh) {                                              \
    v = WARP_OP(v);                                                           \
    const unsigned int w = threadIdx.x / LM_WARP, l = threadIdx.x % LM_WARP; \
    if (l == 0) sh[w] = v;                                                    \
    lm_sync();                                                                \
    T r = l < blockDim.x / LM_WARP ? sh[l] : (IDENT);                         \
    r = WARP_OP(r);                                                           \
    lm_sync();                                                                \
    return r;                                                                 \
  }
LM_BLOCK_REDUCE(lm_block_sum_f32, float, lm_warp_sum_f32, 0.0f)
LM_BLOCK_REDUCE(lm_block_max_f32, float, lm_warp_max_f32, lm_u2f(0xff800000u))
LM_BLOCK_REDUCE(lm_block_sum_i32, int32_t, lm_warp_sum_i32, 0)
LM_BLOCK_REDUCE(lm_block_max_i32, int32_t, lm_warp_max_i32, (-2147483647 - 1))
/* ---- end of prelude ---- */
)LMCM";

// The C prelude without its preprocessor lines (includes, the inline/FMA macros): each
// dialect defines LM_INLINE and LM_FMA itself. Its constants (#define LM_MAGIC) stay.
// Without the conversions `halves` says the device part defines (kCudaHalf, kHipHalf).
std::string c_math(HalfConversions halves) {
  std::istringstream in(cpu::c_prelude());
  std::string out;
  bool skipping = false;
  const bool f16 = halves != HalfConversions::Software, bf16 = halves == HalfConversions::NativeF16Bf16;
  for (std::string line; std::getline(in, line);) {
    if ((f16 && (line.rfind("LM_INLINE float lm_f16_to_f32(", 0) == 0 ||
                 line.rfind("LM_INLINE uint16_t lm_f32_to_f16(", 0) == 0)) ||
        (bf16 && line.rfind("LM_INLINE uint16_t lm_f32_to_bf16(", 0) == 0))
      skipping = true;
    if (skipping) {
      skipping = line != "}";
      continue;
    }
    const bool drop = line.rfind("#include", 0) == 0 || line.rfind("#if", 0) == 0 ||
                      line.rfind("#else", 0) == 0 || line.rfind("#endif", 0) == 0 ||
                      line.rfind("#define LM_INLINE", 0) == 0 || line.rfind("#define LM_RESTRICT", 0) == 0 ||
                      line.rfind("#define LM_FMA", 0) == 0;
    if (!drop) out += line + "\n";
  }
  return out;
}

}  // namespace

std::string device_prelude(const GpuArch& arch) {
  std::string s = "#define LM_WARP " + std::to_string(arch.warp) + "\n";
  if (arch.dialect == Dialect::Cuda) {
    s += kCudaPart;
    s += kCudaHalf;
    s += kCudaFast;
    s += fast_tanh("__float_as_uint", "__uint_as_float");
    if (arch.mma_m16n8k16) s += kCudaMma;
    if (arch.async_copy) s += kCudaAsync;
  } else {
    s += kHipPart;
    s += kHipHalf;
    s += kHipFast;
    if (arch.mfma_f16) s += kHipMfma;
    if (arch.mfma_bf16) s += arch.mfma_bf16_1k ? kHipMfmaBf16 : kHipMfmaBf16Gfx908;
    if (arch.wmma) s += kHipWmma;
  }
  return s;
}

HalfConversions native_half_conversions(const GpuArch& arch) {
  return arch.dialect == Dialect::Cuda ? HalfConversions::NativeF16Bf16 : HalfConversions::NativeF16;
}

std::string common_device_code(HalfConversions halves) {
  static const std::string soft = c_math(HalfConversions::Software) + kCommon,
                           f16 = c_math(HalfConversions::NativeF16) + kCommon,
                           both = c_math(HalfConversions::NativeF16Bf16) + kCommon;
  return halves == HalfConversions::Software ? soft : halves == HalfConversions::NativeF16 ? f16 : both;
}

std::string emulated_fast_math() { return kEmulatedFast + fast_tanh("lm_f2u", "lm_u2f"); }

}  // namespace luminal::gpu
