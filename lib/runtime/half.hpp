// f16 and bf16 conversions (bit patterns in uint16_t). float -> half rounds to nearest
// even, like PyTorch's CPU casts; half -> float is exact. NaNs: f16 -> f32 is IEEE 754's
// convertFormat, which delivers a quiet NaN for a signaling one (the payload kept, the
// quiet bit set), as F16C's vcvtph2ps and PyTorch do; bf16 -> f32 is the 16-bit shift
// PyTorch does, which keeps every bit.
#pragma once

#include <cstdint>
#include <cstring>

namespace luminal::detail {

inline uint32_t float_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
inline float bits_float(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

inline float bf16_to_f32(uint16_t h) { return bits_float(static_cast<uint32_t>(h) << 16); }

inline uint16_t f32_to_bf16(float f) {
  const uint32_t u = float_bits(f);
  if ((u & 0x7fffffffu) > 0x7f800000u)
    return static_cast<uint16_t>((u >> 16) | 0x40u);  // NaN stays a quiet NaN
  const uint32_t lsb = (u >> 16) & 1u;
  return static_cast<uint16_t>((u + 0x7fffu + lsb) >> 16);
}

inline float f16_to_f32(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t man = h & 0x3ffu;
  if (exp == 0x1f) return bits_float(sign | 0x7f800000u | (man << 13) | (man ? 0x400000u : 0u));  // inf / NaN
  if (exp == 0) {
    if (man == 0) return bits_float(sign);
    // Subnormal: value = man * 2^-24, exact in float.
    int e = -1;
    do {
      ++e;
      man <<= 1;
    } while ((man & 0x400u) == 0);
    return bits_float(sign | static_cast<uint32_t>(127 - 15 - e) << 23 | ((man & 0x3ffu) << 13));
  }
  return bits_float(sign | ((exp + 112u) << 23) | (man << 13));
}

inline uint16_t f32_to_f16(float f) {
  const uint32_t u = float_bits(f);
  const uint16_t sign = static_cast<uint16_t>((u >> 16) & 0x8000u);
  const uint32_t a = u & 0x7fffffffu;
  if (a > 0x7f800000u) return static_cast<uint16_t>(sign | 0x7e00u | ((a >> 13) & 0x3ffu));  // NaN
  if (a >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // rounds to >= 65520: inf
  if (a < 0x38800000u) {
    // Result is subnormal (or zero): scale to units of 2^-24 and round to nearest even.
    if (a < 0x33000000u) return sign;  // < 2^-25: rounds to zero (2^-25 itself ties to 0)
    const uint32_t exp = a >> 23;
    const uint32_t man = (a & 0x7fffffu) | 0x800000u;
    const uint32_t shift = 126u - exp;  // man * 2^(exp-150) / 2^-24 = man >> (126 - exp)
    uint32_t q = man >> shift;
    const uint32_t rem = man & ((1u << shift) - 1u);
    const uint32_t half = 1u << (shift - 1u);
    if (rem > half || (rem == half && (q & 1u))) ++q;
    return static_cast<uint16_t>(sign | q);
  }
  // Normal: rebias the exponent, round the 13 dropped mantissa bits to nearest even.
  const uint32_t lsb = (a >> 13) & 1u;
  const uint32_t r = a + 0xfffu + lsb;
  return static_cast<uint16_t>(sign | ((r - 0x38000000u) >> 13));
}

}  // namespace luminal::detail
