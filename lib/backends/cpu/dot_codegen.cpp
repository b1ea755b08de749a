#include "backends/cpu/dot_codegen.hpp"

#include <sstream>

#include "backends/cpu/simd_loads.hpp"
#include "luminal/error.hpp"

namespace luminal::cpu {

namespace {
const char* dtype_suffix(DType dt) { return dt == DType::f16 ? "f16" : dt == DType::bf16 ? "bf16" : "f32"; }

// The generic loop: what the reduction renderer would emit, with FMA where the target has it.
std::string generic_body(DType dt) {
  const std::string w = dt == DType::f16    ? "lm_f16_to_f32(w[k])"
                        : dt == DType::bf16 ? "lm_bf16_to_f32(w[k])"
                                            : "w[k]";
  return "  float s = 0.0f;\n"
         "  #pragma omp simd reduction(+:s)\n"
         "  for (int64_t k = 0; k < n; ++k) s = LM_FMA(x[k], " +
         w + ", s);\n  return s;\n";
}

// Four accumulators of `lanes` floats: a step of 4 * lanes elements, then single
// vectors, then a scalar tail. `load(p)`: the weight vector at p, as f32.
std::string simd_body(const std::string& V, const std::string& P, int lanes, const std::string& load_w,
                      const std::string& hsum, DType dt) {
  auto w_at = [&](const std::string& p) {
    std::string s = load_w;
    s.replace(s.find("@"), 1, p);
    return s;
  };
  const std::string L = std::to_string(lanes), L4 = std::to_string(4 * lanes);
  const std::string w = dt == DType::f16    ? "lm_f16_to_f32(w[k])"
                        : dt == DType::bf16 ? "lm_bf16_to_f32(w[k])"
                                            : "w[k]";
  std::ostringstream s;
  s << "  " << V << " a0 = " << P << "setzero_ps(), a1 = a0, a2 = a0, a3 = a0;\n"
    << "  int64_t k = 0;\n"
    << "  for (; k + " << L4 << " <= n; k += " << L4 << ") {\n";
  for (int a = 0; a < 4; ++a) {
    const std::string off = a ? " + " + std::to_string(a * lanes) : "";
    s << "    a" << a << " = " << P << "fmadd_ps(" << P << "loadu_ps(x + k" << off << "), "
      << w_at("w + k" + off) << ", a" << a << ");\n";
  }
  s << "  }\n"
    << "  for (; k + " << L << " <= n; k += " << L << ") a0 = " << P << "fmadd_ps(" << P
    << "loadu_ps(x + k), " << w_at("w + k") << ", a0);\n"
    << "  float s = " << hsum << "(" << P << "add_ps(" << P << "add_ps(a0, a1), " << P
    << "add_ps(a2, a3)));\n"
    << "  for (; k < n; ++k) s = LM_FMA(x[k], " << w << ", s);\n"
    << "  return s;\n";
  return s.str();
}
}  // namespace

std::string dot_function_name(CpuIsa isa, DType w_dtype) {
  return std::string("lm_dot_") + isa_name(isa) + "_" + dtype_suffix(w_dtype);
}

std::string dot_source(CpuIsa isa, DType dt) {
  if (dt != DType::f32 && dt != DType::f16 && dt != DType::bf16)
    throw InternalError("[dot] the weight of a row dot product must be f32, f16 or bf16");
  const std::string WT = dt == DType::f32 ? "float" : "uint16_t";
  std::ostringstream s;
  s << "/* ---- generated dot product " << dot_function_name(isa, dt) << " ---- */\n";
  if (isa != CpuIsa::Generic) s << "#include <immintrin.h>\n";
  if (isa == CpuIsa::Avx2)  // horizontal sum of 8 floats
    s << "#ifndef LM_HSUM256_DEFINED\n#define LM_HSUM256_DEFINED\n"
      << "static inline float lm_hsum256(__m256 v) {\n"
      << "  __m128 q = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));\n"
      << "  q = _mm_add_ps(q, _mm_movehl_ps(q, q));\n"
      << "  q = _mm_add_ss(q, _mm_movehdup_ps(q));\n"
      << "  return _mm_cvtss_f32(q);\n}\n#endif\n";
  s << "static inline float " << dot_function_name(isa, dt) << "(const float* restrict x, const " << WT
    << "* restrict w, int64_t n) {\n";
  switch (isa) {
    case CpuIsa::Generic:
      s << generic_body(dt);
      break;
    case CpuIsa::Avx512: {
      s << simd_body("__m512", "_mm512_", 16, simd_load_f32(16, dt, "@"), "_mm512_reduce_add_ps", dt);
      break;
    }
    case CpuIsa::Avx2: {
      // vcvtph2ps is F16C, not AVX2: without it (no such AVX2 CPU is known) the generic loop
      if (dt == DType::f16) s << "#ifdef __F16C__\n";
      s << simd_body("__m256", "_mm256_", 8, simd_load_f32(8, dt, "@"), "lm_hsum256", dt);
      if (dt == DType::f16) s << "#else\n" << generic_body(dt) << "#endif\n";
      break;
    }
  }
  s << "}\n";
  return s.str();
}

}  // namespace luminal::cpu
