#include "backends/cpu/simd_loads.hpp"

#include "luminal/error.hpp"

namespace luminal::cpu {

std::string simd_load_f32(int lanes, DType dt, const std::string& ptr) {
  if (lanes != 16 && lanes != 8) throw InternalError("[simd_load_f32] lanes must be 16 or 8");
  const bool wide = lanes == 16;
  // The halves' integer vector: 256 bits hold 16, 128 bits hold 8.
  const std::string halves = wide ? "_mm256_loadu_si256((const __m256i*)(" + ptr + "))"
                                  : "_mm_loadu_si128((const __m128i*)(" + ptr + "))";
  switch (dt) {
    case DType::f32:
      return (wide ? "_mm512_loadu_ps(" : "_mm256_loadu_ps(") + ptr + ")";
    case DType::f16:
      return (wide ? "_mm512_cvtph_ps(" : "_mm256_cvtph_ps(") + halves + ")";
    case DType::bf16:
      return wide ? "_mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(" + halves + "), 16))"
                  : "_mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(" + halves + "), 16))";
    default:
      throw InternalError("[simd_load_f32] loads f32, f16 or bf16 only");
  }
}

}  // namespace luminal::cpu
