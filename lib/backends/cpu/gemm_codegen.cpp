#include "backends/cpu/gemm_codegen.hpp"

#include <algorithm>
#include <sstream>

#include "backends/cpu/jit.hpp"
#include "backends/cpu/simd_loads.hpp"
#include "kernel/kernel_ir.hpp"
#include "luminal/error.hpp"

namespace luminal::cpu {

CpuIsa host_isa() {
  const std::string& sig = cpu_signature();
  if (sig.find(" avx512f") != std::string::npos) return CpuIsa::Avx512;
  if (sig.find(" avx2") != std::string::npos && sig.find(" fma") != std::string::npos) return CpuIsa::Avx2;
  return CpuIsa::Generic;
}

const char* isa_name(CpuIsa isa) {
  switch (isa) {
    case CpuIsa::Avx512:
      return "avx512";
    case CpuIsa::Avx2:
      return "avx2";
    case CpuIsa::Generic:
      return "generic";
  }
  return "?";
}

namespace {
int vector_width(CpuIsa isa) { return isa == CpuIsa::Avx512 ? 16 : isa == CpuIsa::Avx2 ? 8 : 1; }
int register_count(CpuIsa isa) { return isa == CpuIsa::Avx512 ? 32 : 16; }

// Why an mr x nr micro tile cannot be generated for `isa`; empty when it can.
std::string micro_tile_problem(CpuIsa isa, int mr, int nr) {
  const int w = vector_width(isa);
  if (mr <= 0 || nr <= 0 || nr % w != 0)
    return "[gemm] micro tile " + std::to_string(mr) + "x" + std::to_string(nr) +
           ": nr must be a positive multiple of " + std::to_string(w) + " for " + isa_name(isa);
  // accumulators + one vector per B column block + one broadcast register
  if (isa != CpuIsa::Generic && mr * (nr / w) + nr / w + 1 > register_count(isa))
    return "[gemm] micro tile " + std::to_string(mr) + "x" + std::to_string(nr) + " needs more than the " +
           std::to_string(register_count(isa)) + " vector registers of " + isa_name(isa);
  if (mr * nr > 4096) return "[gemm] micro tile too large";
  return {};
}
}  // namespace

bool micro_tile_fits(CpuIsa isa, int mr, int nr) { return micro_tile_problem(isa, mr, nr).empty(); }

void check_micro_tile(CpuIsa isa, int mr, int nr) {
  if (std::string why = micro_tile_problem(isa, mr, nr); !why.empty()) throw InternalError(why);
}

GemmTileDefaults default_gemm_tile(CpuIsa isa) {
  switch (isa) {
    case CpuIsa::Avx512:
      return {8, 32, 128, 256, 2048};
    case CpuIsa::Avx2:
      return {6, 16, 96, 256, 2048};
    case CpuIsa::Generic:
      return {4, 16, 64, 256, 1024};
  }
  return {4, 16, 64, 256, 1024};
}

int64_t gemm_scratch_bytes(int64_t M, int64_t N, int64_t K, int64_t csa, int64_t rsb, int64_t csb, int mr,
                           int nr, int mc, int nc, int kc) {
  // Mirrors the driver: the paths that pack nothing, then its clamped cache blocks
  // (MC <= the rows of a task <= M rounded up to mr; NC likewise; KC <= K).
  if (M <= 0 || N <= 0 || K <= 0) return 0;
  if (M <= 4 && (csb == 1 || rsb == 1)) return 0;
  if (N <= 4 && csa == 1) return 0;
  const int64_t rows = (M + mr - 1) / mr * mr, cols = (N + nr - 1) / nr * nr;
  const int64_t KC = std::min<int64_t>(kc, K), MC = std::min<int64_t>(mc, rows),
                NC = std::min<int64_t>(nc, cols);
  auto up = [](int64_t bytes) { return (bytes + 63) / 64 * 64; };
  return up(KC * MC * 4) + up(KC * NC * 4);
}

std::string gemm_function_name(CpuIsa isa, int mr, int nr, DType b_dtype) {
  const std::string b = b_dtype == DType::f16 ? "_b_f16" : b_dtype == DType::bf16 ? "_b_bf16" : "";
  return "lm_gemm_" + std::string(isa_name(isa)) + "_" + std::to_string(mr) + "x" + std::to_string(nr) + b;
}

namespace {

// The register-tiled micro-kernel: c[0..mr, 0..nr] (+)= a_panel^T * b_panel.
std::string micro_kernel(CpuIsa isa, int mr, int nr, const std::string& name) {
  std::ostringstream s;
  const int w = vector_width(isa);
  const int nv = nr / w;
  s << "static inline __attribute__((always_inline)) void " << name
    << "(int64_t kc, const float* restrict a, const float* restrict b, float* restrict c, int64_t ldc, int "
       "accumulate) {\n";
  if (isa == CpuIsa::Generic) {
    s << "  float acc[" << mr << "][" << nr << "] = {{0}};\n"
      << "  for (int64_t p = 0; p < kc; ++p) {\n"
      << "    for (int r = 0; r < " << mr << "; ++r) {\n"
      << "      const float ar = a[p * " << mr << " + r];\n"
      << "      #pragma omp simd\n"
      << "      for (int j = 0; j < " << nr << "; ++j) acc[r][j] += ar * b[p * " << nr << " + j];\n"
      << "    }\n  }\n"
      << "  for (int r = 0; r < " << mr << "; ++r)\n"
      << "    for (int j = 0; j < " << nr
      << "; ++j) c[r * ldc + j] = (accumulate ? c[r * ldc + j] : 0.0f) + acc[r][j];\n"
      << "}\n";
    return s.str();
  }
  const std::string V = isa == CpuIsa::Avx512 ? "__m512" : "__m256";
  const std::string P = isa == CpuIsa::Avx512 ? "_mm512_" : "_mm256_";
  for (int r = 0; r < mr; ++r)
    for (int v = 0; v < nv; ++v) s << "  " << V << " c" << r << "_" << v << " = " << P << "setzero_ps();\n";
  s << "  #pragma GCC unroll 4\n  for (int64_t p = 0; p < kc; ++p) {\n";
  for (int v = 0; v < nv; ++v)
    s << "    const " << V << " b" << v << " = " << P << "load_ps(b + " << v * w << ");\n";
  for (int r = 0; r < mr; ++r) {
    s << "    { const " << V << " ar = " << P << "set1_ps(a[" << r << "]);";
    for (int v = 0; v < nv; ++v)
      s << " c" << r << "_" << v << " = " << P << "fmadd_ps(ar, b" << v << ", c" << r << "_" << v << ");";
    s << " }\n";
  }
  s << "    a += " << mr << "; b += " << nr << ";\n  }\n";
  s << "  if (accumulate) {\n";
  for (int r = 0; r < mr; ++r)
    for (int v = 0; v < nv; ++v)
      s << "    c" << r << "_" << v << " = " << P << "add_ps(c" << r << "_" << v << ", " << P
        << "loadu_ps(c + " << r << " * ldc + " << v * w << "));\n";
  s << "  }\n";
  for (int r = 0; r < mr; ++r)
    for (int v = 0; v < nv; ++v)
      s << "  " << P << "storeu_ps(c + " << r << " * ldc + " << v * w << ", c" << r << "_" << v << ");\n";
  s << "}\n";
  return s.str();
}

// dst[q * ldd + j] = src[j * lds + q] for j, q < 16: a 16x16 transpose in registers
// (unpack pairs of rows, then 4-float groups, then 128-bit lanes twice: 64 shuffles).
std::string transpose16_source() {
  return R"(#ifndef LM_TR16_DEFINED
#define LM_TR16_DEFINED
static inline __attribute__((always_inline)) void lm_tr16(const float* src, int64_t lds, float* dst, int64_t ldd) {
  __m512 r[16], t[16], u[16], v[16];
  for (int j = 0; j < 16; ++j) r[j] = _mm512_loadu_ps(src + j * lds);
  for (int j = 0; j < 16; j += 2) {
    t[j] = _mm512_unpacklo_ps(r[j], r[j + 1]);
    t[j + 1] = _mm512_unpackhi_ps(r[j], r[j + 1]);
  }
  /* u[4g + s], per 128-bit lane L: rows 4g..4g+3 at k = 4L + s */
  for (int g = 0; g < 4; ++g) {
    u[4 * g + 0] = _mm512_shuffle_ps(t[4 * g], t[4 * g + 2], 0x44);
    u[4 * g + 1] = _mm512_shuffle_ps(t[4 * g], t[4 * g + 2], 0xEE);
    u[4 * g + 2] = _mm512_shuffle_ps(t[4 * g + 1], t[4 * g + 3], 0x44);
    u[4 * g + 3] = _mm512_shuffle_ps(t[4 * g + 1], t[4 * g + 3], 0xEE);
  }
  for (int q = 0; q < 4; ++q) {
    v[4 * q + 0] = _mm512_shuffle_f32x4(u[q], u[4 + q], 0x88);
    v[4 * q + 1] = _mm512_shuffle_f32x4(u[q], u[4 + q], 0xDD);
    v[4 * q + 2] = _mm512_shuffle_f32x4(u[8 + q], u[12 + q], 0x88);
    v[4 * q + 3] = _mm512_shuffle_f32x4(u[8 + q], u[12 + q], 0xDD);
    _mm512_storeu_ps(dst + (q + 0) * ldd, _mm512_shuffle_f32x4(v[4 * q], v[4 * q + 2], 0x88));
    _mm512_storeu_ps(dst + (q + 8) * ldd, _mm512_shuffle_f32x4(v[4 * q], v[4 * q + 2], 0xDD));
    _mm512_storeu_ps(dst + (q + 4) * ldd, _mm512_shuffle_f32x4(v[4 * q + 1], v[4 * q + 3], 0x88));
    _mm512_storeu_ps(dst + (q + 12) * ldd, _mm512_shuffle_f32x4(v[4 * q + 1], v[4 * q + 3], 0xDD));
  }
}
#endif
)";
}

// The same transpose reading 16 halves per row (f16 via F16C's vcvtph2ps, bf16 by a shift
// into the high half of each f32): the conversion costs one instruction per row.
std::string transpose16_half_source(DType dt) {
  const bool f16 = dt == DType::f16;
  std::string name = f16 ? "lm_tr16_f16" : "lm_tr16_bf16";
  std::string guard = f16 ? "LM_TR16_F16_DEFINED" : "LM_TR16_BF16_DEFINED";
  const std::string load = simd_load_f32(16, dt, "src + j * lds");
  std::string src = transpose16_source();
  // Same body, other name, other element type and row load.
  auto replace = [&](const std::string& from, const std::string& to) {
    for (size_t at = src.find(from); at != std::string::npos; at = src.find(from, at + to.size()))
      src.replace(at, from.size(), to);
  };
  replace("LM_TR16_DEFINED", guard);
  replace("void lm_tr16(const float* src", "void " + name + "(const uint16_t* src");
  replace("_mm512_loadu_ps(src + j * lds)", load);
  return src;
}

}  // namespace

std::string gemm_source(CpuIsa isa, int mr, int nr, DType b_dtype) {
  check_micro_tile(isa, mr, nr);
  if (b_dtype != DType::f32 && b_dtype != DType::f16 && b_dtype != DType::bf16)
    throw InternalError("[gemm] B must be f32, f16 or bf16");
  const bool half = b_dtype != DType::f32;
  const std::string fn = gemm_function_name(isa, mr, nr, b_dtype);
  const std::string MR = std::to_string(mr), NR = std::to_string(nr);
  // B's element type, its conversion to f32, and the names of the helpers that read it.
  const std::string BT = half ? "uint16_t" : "float";
  const std::string cvt = b_dtype == DType::f16 ? "lm_f16_to_f32" : b_dtype == DType::bf16 ? "lm_bf16_to_f32" : "";
  auto rd = [&](const std::string& e) { return half ? cvt + "(" + e + ")" : e; };
  const std::string sfx = b_dtype == DType::f16 ? "_f16" : b_dtype == DType::bf16 ? "_bf16" : "";
  const std::string small_m = "lm_gemm_small_m" + sfx, small_n = "lm_gemm_small_n" + sfx;
  const std::string tr16 = "lm_tr16" + sfx;
  std::ostringstream s;
  s << "/* ---- generated SGEMM " << fn << " ---- */\n";
  if (isa != CpuIsa::Generic) s << "#include <immintrin.h>\n";
  s << "#include <stdlib.h>\n#include <string.h>\n"
    << "#ifndef LM_EPI_FN_DEFINED\n#define LM_EPI_FN_DEFINED\n"
    << "typedef void (*lm_epi_fn)(void* ctx, float* c, int64_t ldc, int64_t i0, int64_t j0, int64_t rows, "
       "int64_t cols);\n"
    // A product's arguments, as its tasks see them (copied into the job when the kernel
    // does not wait for it: the epilogue context travels by value).
    << "#define LM_EPI_CTX_MAX " << kGemmEpiContextMax << "\n"
    << "#define LM_BSEG_MAX " << kernel::kMaxGemmSegments << "\n"
    << "typedef struct {\n"
    << "  int64_t M, N, K; const float* A; int64_t rsa, csa; const void* B; int64_t rsb, csb;\n"
    << "  float* C; int64_t ldc, MC, NC, KC, tn, rows_per, cols_per;\n"
    << "  lm_epi_fn epi; const lm_runtime* rt; void* cx;\n"
    // A segmented B: columns [sn0[s], sn0[s+1]) are segment s's columns 0.. (B is segment 0).
    << "  int64_t nseg; const void* sB[LM_BSEG_MAX]; int64_t srs[LM_BSEG_MAX], scs[LM_BSEG_MAX], "
       "sn0[LM_BSEG_MAX + 1];\n"
    << "  _Alignas(16) unsigned char epi_ctx[LM_EPI_CTX_MAX];\n"
    << "} lm_gemm_env;\n"
    // The segment holding column j.
    << "static inline int64_t lm_bseg(const lm_gemm_env* e, int64_t j) {\n"
    << "  int64_t s = e->nseg - 1;\n  while (s > 0 && e->sn0[s] > j) --s;\n  return s;\n}\n"
    << "#endif\n";
  s << micro_kernel(isa, mr, nr, fn + "_ukr");
  // Packing: B strips [kc][nr] and A strips [kc][mr], zero-padded past the matrix edge.
  // B read as the transpose of a row-major [N, K] weight (x @ W^T, every nn.Linear) has
  // its strip's columns contiguous along k: element-wise packing is a strided gather
  // (measured 6.4 ms of a 25 ms 128x5632x2048 product), so on AVX-512 the strip is
  // packed by 16x16 register transposes instead.
  if (isa == CpuIsa::Avx512 && nr % 16 == 0) s << (half ? transpose16_half_source(b_dtype) : transpose16_source());
  s << "static void " << fn << "_pack_b(int64_t kc, int64_t cols, const " << BT
    << "* B, int64_t rsb, int64_t csb, float* restrict out) {\n"
    << "  if (csb == 1 && cols == " << NR << ") {\n"
    << "    for (int64_t p = 0; p < kc; ++p) {\n"
    << "      #pragma omp simd\n"
    << "      for (int64_t j = 0; j < " << NR << "; ++j) out[p * " << NR << " + j] = " << rd("B[p * rsb + j]")
    << ";\n"
    << "    }\n    return;\n  }\n";
  if (isa == CpuIsa::Avx512 && nr % 16 == 0)
    s << "  if (rsb == 1 && cols == " << NR << ") {\n"
      << "    int64_t p0 = 0;\n"
      << "    for (; p0 + 16 <= kc; p0 += 16) {\n"
      // The strip's rows are read 64 bytes at a time, 32 short streams the hardware
      // prefetcher barely follows: the same 64 bytes of the next nr rows of the weight
      // (usually the next call's strip) are requested into L2 now. 128x5632x2048 on one
      // core: 16.2 -> 14.8 ms; 32x4096x4096 (MLP batch 32): 11.1 -> 8.5 ms. Integer
      // address arithmetic: past the last row the address is outside the matrix, which
      // a prefetch may name (it never faults) but C pointer arithmetic may not.
      << "      for (int64_t j = 0; j < " << NR << "; ++j)\n"
      << "        __builtin_prefetch((const void*)((uintptr_t)(B + p0) + (uintptr_t)((" << NR
      << " + j) * csb) * sizeof(" << BT << ")), 0, 2);\n"
      << "      for (int64_t g = 0; g < " << nr / 16 << "; ++g) " << tr16 << "(B + g * 16 * csb + p0, csb, out + p0 * "
      << NR << " + g * 16, " << NR << ");\n"
      << "    }\n"
      << "    for (int64_t p = p0; p < kc; ++p)\n"
      << "      for (int64_t j = 0; j < " << NR << "; ++j) out[p * " << NR << " + j] = " << rd("B[p + j * csb]")
      << ";\n"
      << "    return;\n  }\n";
  s << "  for (int64_t p = 0; p < kc; ++p)\n"
    << "    for (int64_t j = 0; j < " << NR << "; ++j) out[p * " << NR
    << " + j] = j < cols ? " << rd("B[p * rsb + j * csb]") << " : 0.0f;\n"
    << "}\n";
  s << "static void " << fn
    << "_pack_a(int64_t kc, int64_t rows, const float* A, int64_t rsa, int64_t csa, float* restrict out) {\n"
    << "  if (rows < " << MR << ") memset(out, 0, sizeof(float) * (size_t)kc * " << MR << ");\n"
    << "  for (int64_t r = 0; r < rows; ++r) {\n"
    << "    const float* ar = A + r * rsa;\n"
    << "    for (int64_t p = 0; p < kc; ++p) out[p * " << MR << " + r] = ar[p * csa];\n"
    << "  }\n}\n";
  // Few rows (decode-like GEMV, M <= 4): packing B would copy the whole weight matrix
  // for a product that reads each of its elements M times, so B is streamed once, in
  // place: axpy over contiguous rows of B, or dot products over contiguous columns
  // (B = W^T of a [N, K] weight). Bandwidth-bound either way; blocks of columns are the
  // tasks. Other strides return 0 and take the packed path.
  // AVX-512 with a half B: 32 halves per step converted by one instruction each 16.
  std::string half_dot;
  if (half && isa == CpuIsa::Avx512) {
    auto at = [&](const std::string& ptr) { return simd_load_f32(16, b_dtype, ptr); };
    // Four accumulators, as the row dot products (dot_codegen.cpp): two FMA chains left
    // each column's sum waiting on the FMA latency.
    half_dot = "        if (csa == 1) {\n"
               "          __m512 s0 = _mm512_setzero_ps(), s1 = s0, s2 = s0, s3 = s0;\n"
               "          int64_t k = 0;\n"
               "          for (; k + 64 <= K; k += 64) {\n"
               "            s0 = _mm512_fmadd_ps(_mm512_loadu_ps(arow + k), " +
               at("bcol + k") +
               ", s0);\n"
               "            s1 = _mm512_fmadd_ps(_mm512_loadu_ps(arow + k + 16), " +
               at("bcol + k + 16") +
               ", s1);\n"
               "            s2 = _mm512_fmadd_ps(_mm512_loadu_ps(arow + k + 32), " +
               at("bcol + k + 32") +
               ", s2);\n"
               "            s3 = _mm512_fmadd_ps(_mm512_loadu_ps(arow + k + 48), " +
               at("bcol + k + 48") +
               ", s3);\n"
               "          }\n"
               "          for (; k + 16 <= K; k += 16) s0 = _mm512_fmadd_ps(_mm512_loadu_ps(arow + k), " +
               at("bcol + k") +
               ", s0);\n"
               "          sum = _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(s0, s1), _mm512_add_ps(s2, s3)));\n"
               "          for (; k < K; ++k) sum += arow[k] * " +
               rd("bcol[k]") +
               ";\n"
               "        } else\n";
  }
  // Shared by every B type: runs a task over blocks on the team or here.
  s << "#ifndef LM_GEMM_BLOCKS_DEFINED\n#define LM_GEMM_BLOCKS_DEFINED\n"
    // Runs `task` over [0, n) blocks: on the team when the product is worth it and the
    // caller runs it (tid < 0), else here as member tid.
    << "static void lm_gemm_blocks(lm_gemm_env* e, int64_t n, int worth, lm_task_fn task, int tid, int tail) "
       "{\n"
    << "  if (tid < 0 && worth)\n"
    << "    e->rt->parallel_for(e->cx, n, lm_chunk(e->rt, e->cx, n, 1), task, e, sizeof *e, tail);\n"
    << "  else\n"
    << "    task(e, 0, n, tid < 0 ? 0 : tid);\n"
    << "}\n#endif\n";
  s << "#ifndef LM_GEMM_SMALL" << sfx << "_DEFINED\n#define LM_GEMM_SMALL" << sfx << "_DEFINED\n"
    // Columns [j0, j0 + cols) of C from B, which points at column j0 (of its segment):
    // axpy over contiguous rows of B (cols <= 256), or dot products over its columns.
    << "static void " << small_m << "_cols(const lm_gemm_env* e, const " << BT
    << "* B, int64_t rsb, int64_t csb, int64_t j0, int64_t cols) {\n"
    << "  const int64_t M = e->M, K = e->K, rsa = e->rsa, csa = e->csa, ldc = e->ldc;\n"
    << "  const float* A = e->A; float* C = e->C;\n"
    << "  if (csb == 1) {\n"
    << "    float acc[4][256] __attribute__((aligned(64)));\n"
    << "    memset(acc, 0, sizeof acc);\n"
    << "    for (int64_t k = 0; k < K; ++k) {\n"
    << "      const " << BT << "* restrict brow = B + k * rsb;\n"
    << "      for (int64_t i = 0; i < M; ++i) {\n"
    << "        const float a = A[i * rsa + k * csa];\n"
    << "        float* restrict ai = acc[i];\n"
    << "        #pragma omp simd\n"
    << "        for (int64_t j = 0; j < cols; ++j) ai[j] = LM_FMA(a, " << rd("brow[j]") << ", ai[j]);\n"
    << "      }\n    }\n"
    << "    for (int64_t i = 0; i < M; ++i) memcpy(C + i * ldc + j0, acc[i], sizeof(float) * (size_t)cols);\n"
    << "  } else {\n"
    << "    for (int64_t jj = 0; jj < cols; ++jj) {\n"
    << "      const " << BT << "* restrict bcol = B + jj * csb;\n"
    << "      for (int64_t i = 0; i < M; ++i) {\n"
    << "        const float* restrict arow = A + i * rsa;\n"
    << "        float sum = 0.0f;\n"
    << half_dot
    << "        if (csa == 1) {\n"
    << "          #pragma omp simd reduction(+:sum)\n"
    << "          for (int64_t k = 0; k < K; ++k) sum += arow[k] * " << rd("bcol[k]") << ";\n"
    << "        } else {\n"
    << "          for (int64_t k = 0; k < K; ++k) sum += arow[k * csa] * " << rd("bcol[k]") << ";\n"
    << "        }\n"
    << "        C[i * ldc + j0 + jj] = sum;\n"
    << "      }\n    }\n"
    << "  }\n"
    << "  if (e->epi) e->epi((void*)e->epi_ctx, C + j0, ldc, 0, j0, M, cols);\n"
    << "}\n"
    // Blocks of 256 columns (64 when a segment is read by dot products), cut at segment ends.
    << "static int64_t " << small_m << "_width(const lm_gemm_env* e) {\n"
    << "  for (int64_t s = 0; s < e->nseg; ++s) if (e->scs[s] != 1) return 64;\n"
    << "  return 256;\n}\n"
    << "static void " << small_m << "_task(void* lm_env, int64_t lo, int64_t hi, int tid) {\n"
    << "  const lm_gemm_env* e = (const lm_gemm_env*)lm_env; (void)tid;\n"
    << "  const int64_t W = " << small_m << "_width(e);\n"
    << "  for (int64_t blk = lo; blk < hi; ++blk) {\n"
    << "    const int64_t j1 = e->N < (blk + 1) * W ? e->N : (blk + 1) * W;\n"
    << "    for (int64_t j = blk * W; j < j1;) {\n"
    << "      const int64_t sg = lm_bseg(e, j), end = e->sn0[sg + 1] < j1 ? e->sn0[sg + 1] : j1;\n"
    << "      " << small_m << "_cols(e, (const " << BT << "*)e->sB[sg] + (j - e->sn0[sg]) * e->scs[sg], e->srs[sg], "
       "e->scs[sg], j, end - j);\n"
    << "      j = end;\n"
    << "    }\n  }\n}\n"
    << "static int " << small_m << "(lm_gemm_env* e, int tid, int tail) {\n"
    << "  if (e->M > 4) return 0;\n"
    << "  for (int64_t s = 0; s < e->nseg; ++s) if (e->scs[s] != 1 && e->srs[s] != 1) return 0;\n"
    << "  const int64_t W = " << small_m << "_width(e), nb = (e->N + W - 1) / W;\n"
    << "  lm_gemm_blocks(e, nb, (double)e->N * (double)e->K >= 65536.0, " << small_m << "_task, tid, tail);\n"
    << "  return 1;\n}\n"
    // Few columns (a matrix-vector product written W @ x): N <= 4 would waste most of an
    // nr-wide micro tile, so each output is a dot product over a contiguous row of A.
    << "static void " << small_n << "_task(void* lm_env, int64_t lo, int64_t hi, int tid) {\n"
    << "  const lm_gemm_env* e = (const lm_gemm_env*)lm_env; (void)tid;\n"
    << "  const int64_t M = e->M, N = e->N, K = e->K, rsa = e->rsa, rsb = e->rsb, csb = e->csb, ldc = "
       "e->ldc;\n"
    << "  const float* A = e->A; const " << BT << "* B = (const " << BT << "*)e->B; float* C = e->C;\n"
    << "  for (int64_t blk = lo; blk < hi; ++blk) {\n"
    << "    const int64_t i0 = blk * 64, i1 = M < i0 + 64 ? M : i0 + 64;\n"
    << "    for (int64_t i = i0; i < i1; ++i) {\n"
    << "      const float* restrict arow = A + i * rsa;\n"
    << "      for (int64_t j = 0; j < N; ++j) {\n"
    << "        const " << BT << "* restrict bcol = B + j * csb;\n"
    << "        float sum = 0.0f;\n"
    << "        if (rsb == 1) {\n"
    << "          #pragma omp simd reduction(+:sum)\n"
    << "          for (int64_t k = 0; k < K; ++k) sum += arow[k] * " << rd("bcol[k]") << ";\n"
    << "        } else {\n"
    << "          #pragma omp simd reduction(+:sum)\n"
    << "          for (int64_t k = 0; k < K; ++k) sum += arow[k] * " << rd("bcol[k * rsb]") << ";\n"
    << "        }\n"
    << "        C[i * ldc + j] = sum;\n"
    << "      }\n    }\n"
    << "    if (e->epi) e->epi((void*)e->epi_ctx, C + i0 * ldc, ldc, i0, 0, i1 - i0, N);\n"
    << "  }\n}\n"
    << "static int " << small_n << "(lm_gemm_env* e, int tid, int tail) {\n"
    << "  if (e->N > 4 || e->csa != 1 || e->nseg > 1) return 0;\n"
    << "  lm_gemm_blocks(e, (e->M + 63) / 64, (double)e->M * (double)e->K >= 65536.0, " << small_n
    << "_task, tid, tail);\n"
    << "  return 1;\n}\n#endif\n";
  // The tasks of the packed path. The output is cut into independent tasks (row ranges
  // first, then column ranges when M is too small to feed every thread); a task packs
  // its own B panel and A blocks into its thread's scratch and runs its micro-kernels, so
  // threads never wait for each other inside the GEMM. That keeps the GEMM fast when a
  // core is briefly taken by another process (a shared B panel costs a barrier per K
  // block, and a descheduled thread stalls every barrier). The price is packing B once
  // per row range or A once per column range (~1% at 2048^3).
  s << "static void " << fn << "_tasks(void* lm_env, int64_t lo, int64_t hi, int tid) {\n"
    << "  const lm_gemm_env* e = (const lm_gemm_env*)lm_env;\n"
    << "  const int64_t M = e->M, N = e->N, K = e->K, rsa = e->rsa, csa = e->csa, ldc = e->ldc;\n"
    << "  const int64_t MC = e->MC, NC = e->NC, KC = e->KC, tn = e->tn, rows_per = e->rows_per, cols_per = "
       "e->cols_per;\n"
    << "  const float* A = e->A; float* C = e->C;\n"
    << "  const lm_epi_fn epi = e->epi; void* ctx = (void*)e->epi_ctx;\n"
    << "  const size_t abytes = ((size_t)KC * MC * sizeof(float) + 63) / 64 * 64;\n"
    << "  const size_t bbytes = ((size_t)KC * NC * sizeof(float) + 63) / 64 * 64;\n"
    << "  float* ap = (float*)e->rt->scratch(e->cx, tid, (int64_t)(abytes + bbytes));\n"
    << "  float* own = 0;  /* no scratch of that size: allocate (never on the executable's path) */\n"
    << "  if (!ap) ap = own = (float*)aligned_alloc(64, abytes + bbytes);\n"
    << "  float* bp = ap + abytes / sizeof(float);\n"
    << "  for (int64_t task = lo; task < hi; ++task) {\n"
    << "    const int64_t r0 = (task / tn) * rows_per, c0 = (task % tn) * cols_per;\n"
    << "    const int64_t r1 = r0 + rows_per < M ? r0 + rows_per : M, c1 = c0 + cols_per < N ? c0 + cols_per "
       ": N;\n"
    // Column blocks end at segment ends: a block's B is one segment's strided view.
    << "    for (int64_t jc = c0, nc = 0; jc < c1; jc += nc) {\n"
    << "      nc = c1 - jc < NC ? c1 - jc : NC;\n"
    << "      const int64_t sg = lm_bseg(e, jc);\n"
    << "      if (jc + nc > e->sn0[sg + 1]) nc = e->sn0[sg + 1] - jc;\n"
    << "      const int64_t rsb = e->srs[sg], csb = e->scs[sg];\n"
    << "      const " << BT << "* Bc = (const " << BT << "*)e->sB[sg] + (jc - e->sn0[sg]) * csb;\n"
    << "      const int64_t nstrips = (nc + " << NR << " - 1) / " << NR << ";\n"
    << "      for (int64_t pc = 0; pc < K; pc += KC) {\n"
    << "        const int64_t kc = K - pc < KC ? K - pc : KC;\n"
    << "        const int first = pc == 0, last = pc + kc >= K;\n"
    // One row block (M <= MC, a prefill's x @ W^T): each B strip is used by one sweep
    // over the A strips only, so it is packed right before that sweep and read back
    // from L1, instead of writing the whole kc x nc panel (~1 MB) through L2 first.
    << "        const int lazy_b = r1 - r0 <= MC;\n"
    << "        if (!lazy_b) for (int64_t js = 0; js < nstrips; ++js) {\n"
    << "          const int64_t cols = nc - js * " << NR << " < " << NR << " ? nc - js * " << NR << " : "
    << NR << ";\n"
    << "          " << fn << "_pack_b(kc, cols, Bc + pc * rsb + js * " << NR
    << " * csb, rsb, csb, bp + js * kc * " << NR << ");\n"
    << "        }\n"
    << "        for (int64_t ic = r0; ic < r1; ic += MC) {\n"
    << "          const int64_t mc = r1 - ic < MC ? r1 - ic : MC;\n"
    << "          const int64_t mstrips = (mc + " << MR << " - 1) / " << MR << ";\n"
    << "          for (int64_t is = 0; is < mstrips; ++is) {\n"
    << "            const int64_t rows = mc - is * " << MR << " < " << MR << " ? mc - is * " << MR << " : "
    << MR << ";\n"
    << "            " << fn << "_pack_a(kc, rows, A + (ic + is * " << MR
    << ") * rsa + pc * csa, rsa, csa, ap + is * kc * " << MR << ");\n"
    << "          }\n"
    << "          for (int64_t js = 0; js < nstrips; ++js) {\n"
    << "            if (lazy_b) " << fn << "_pack_b(kc, nc - js * " << NR << " < " << NR << " ? nc - js * "
    << NR << " : " << NR << ", Bc + pc * rsb + js * " << NR << " * csb, rsb, csb, bp + js * kc * " << NR
    << ");\n"
    << "            for (int64_t is = 0; is < mstrips; ++is) {\n"
    << "              const int64_t i0 = ic + is * " << MR << ", j0 = jc + js * " << NR << ";\n"
    << "              const int64_t rows = r1 - i0 < " << MR << " ? r1 - i0 : " << MR << ";\n"
    << "              const int64_t cols = jc + nc - j0 < " << NR << " ? jc + nc - j0 : " << NR << ";\n"
    << "              float* c = C + i0 * ldc + j0;\n"
    << "              const float* pa = ap + is * kc * " << MR << ";\n"
    << "              const float* pb = bp + js * kc * " << NR << ";\n"
    << "              if (rows == " << MR << " && cols == " << NR << ") {\n"
    << "                " << fn << "_ukr(kc, pa, pb, c, ldc, !first);\n"
    << "              } else {\n"
    << "                float tile[" << mr * nr << "] __attribute__((aligned(64)));\n"
    << "                " << fn << "_ukr(kc, pa, pb, tile, " << NR << ", 0);\n"
    << "                for (int64_t r = 0; r < rows; ++r)\n"
    << "                  for (int64_t j = 0; j < cols; ++j)\n"
    << "                    c[r * ldc + j] = (first ? 0.0f : c[r * ldc + j]) + tile[r * " << NR << " + j];\n"
    << "              }\n"
    << "              if (last && epi) epi(ctx, c, ldc, i0, j0, rows, cols);\n"
    << "            }\n          }\n"
    << "        }\n      }\n    }\n  }\n"
    << "  free(own);\n}\n";
  // The driver: small paths, else the task split (about 3 tasks per thread, so a thread
  // that loses its core for a while leaves the others something to take over).
  s << "static void " << fn << "_seg(int64_t M, int64_t N, int64_t K, const float* A, int64_t rsa, int64_t csa,\n"
    << "    int64_t nseg, const " << BT << "* const* sB, const int64_t* srs, const int64_t* scs, const int64_t* sn0,\n"
    << "    float* C, int64_t ldc,\n"
    << "    int64_t MC, int64_t NC, int64_t KC, lm_epi_fn epi, const void* ctx, int64_t ctx_bytes,\n"
    << "    const lm_runtime* rt, void* cx, int tid, int tail) {\n"
    << "  if (M <= 0 || N <= 0) return;\n"
    << "  lm_gemm_env e;\n"
    << "  e.M = M; e.N = N; e.K = K; e.A = A; e.rsa = rsa; e.csa = csa;\n"
    << "  e.B = sB[0]; e.rsb = srs[0]; e.csb = scs[0]; e.nseg = nseg;\n"
    << "  for (int64_t s = 0; s < nseg; ++s) { e.sB[s] = sB[s]; e.srs[s] = srs[s]; e.scs[s] = scs[s]; e.sn0[s] = sn0[s]; }\n"
    << "  e.sn0[nseg] = N;\n"
    << "  e.C = C; e.ldc = ldc; e.epi = epi; e.rt = rt; e.cx = cx;\n"
    << "  if (epi && ctx_bytes > 0) memcpy(e.epi_ctx, ctx, (size_t)(ctx_bytes < LM_EPI_CTX_MAX ? ctx_bytes : "
       "LM_EPI_CTX_MAX));\n"
    << "  if (K <= 0) {  /* empty sum: C = 0, then the epilogue */\n"
    << "    for (int64_t i = 0; i < M; ++i) memset(C + i * ldc, 0, sizeof(float) * (size_t)N);\n"
    << "    if (epi) epi((void*)e.epi_ctx, C, ldc, 0, 0, M, N);\n    return;\n  }\n"
    << "  if (" << small_m << "(&e, tid, tail)) return;\n"
    << "  if (" << small_n << "(&e, tid, tail)) return;\n"
    << "  const int64_t mstrips_all = (M + " << MR << " - 1) / " << MR << ", nstrips_all = (N + " << NR
    << " - 1) / " << NR << ";\n"
    << "  const int worth = tid < 0 && (double)M * (double)N * (double)K >= 262144.0;\n"
    << "  const int threads = worth ? rt->threads(cx) : 1;\n"
    << "  const int64_t target = threads > 1 ? 3 * (int64_t)threads : 1;\n"
    // Each row range packs all of B (K x N) and each column range all of A (M x K): split
    // the longer side, so a prefill's x @ W^T (M 128, N 5632) does not pack its weight
    // once per row range.
    << "  int64_t tm, tn;\n"
    << "  if (M >= N) {\n"
    << "    tm = mstrips_all < target ? mstrips_all : target;\n"
    << "    tn = (target + tm - 1) / tm;\n"
    << "    if (tn > nstrips_all) tn = nstrips_all;\n"
    << "  } else {\n"
    << "    tn = nstrips_all < target ? nstrips_all : target;\n"
    << "    tm = (target + tn - 1) / tn;\n"
    << "    if (tm > mstrips_all) tm = mstrips_all;\n"
    << "  }\n"
    << "  const int64_t rows_per = (mstrips_all + tm - 1) / tm * " << MR << ";\n"
    << "  const int64_t cols_per = (nstrips_all + tn - 1) / tn * " << NR << ";\n"
    << "  if (NC > cols_per) NC = cols_per;\n  if (MC > rows_per) MC = rows_per;\n  if (KC > K) KC = K;\n"
    << "  e.MC = MC; e.NC = NC; e.KC = KC; e.tn = tn; e.rows_per = rows_per; e.cols_per = cols_per;\n"
    << "  if (threads > 1)\n"
    << "    rt->parallel_for(cx, tm * tn, 1, " << fn << "_tasks, &e, sizeof e, tail);\n"
    << "  else\n"
    << "    " << fn << "_tasks(&e, 0, tm * tn, tid < 0 ? 0 : tid);\n"
    << "}\n";
  // One B operand: a single segment.
  s << "static void " << fn << "(int64_t M, int64_t N, int64_t K, const float* A, int64_t rsa, int64_t csa,\n"
    << "    const " << BT << "* B, int64_t rsb, int64_t csb, float* C, int64_t ldc,\n"
    << "    int64_t MC, int64_t NC, int64_t KC, lm_epi_fn epi, const void* ctx, int64_t ctx_bytes,\n"
    << "    const lm_runtime* rt, void* cx, int tid, int tail) {\n"
    << "  const " << BT << "* sB[1] = {B};\n"
    << "  const int64_t srs[1] = {rsb}, scs[1] = {csb}, sn0[1] = {0};\n"
    << "  " << fn << "_seg(M, N, K, A, rsa, csa, 1, sB, srs, scs, sn0, C, ldc, MC, NC, KC, epi, ctx, ctx_bytes, rt, cx, "
       "tid, tail);\n"
    << "}\n";
  return s.str();
}

}  // namespace luminal::cpu
