// One spelling, in C intrinsics, of "load a vector of f32, f16 or bf16 as f32": the row
// dot products, the GEMMs' transposes and few-row paths and the attention kernels all
// read half-precision operands this way, so a change to the conversion happens once.
#pragma once

#include <string>

#include "luminal/dtype.hpp"

namespace luminal::cpu {

/// A C expression of type __m512 (lanes = 16, AVX-512) or __m256 (lanes = 8, AVX2): the
/// `lanes` consecutive elements of type `dt` at the pointer expression `ptr` (unaligned),
/// as f32. f16 is widened by F16C's vcvtph2ps, bf16 by a shift into each f32's high half;
/// both exact and bit-identical to the prelude's lm_f16_to_f32 / lm_bf16_to_f32
/// (signaling NaNs quieted, payload kept). f16 at 8 lanes needs F16C: guard the use with
/// `#ifdef __F16C__`. Throws InternalError for another lane count or dtype.
std::string simd_load_f32(int lanes, DType dt, const std::string& ptr);

}  // namespace luminal::cpu
