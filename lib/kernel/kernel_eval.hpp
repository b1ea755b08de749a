// A slow, obviously-correct evaluator of kernel IR programs on host memory: the oracle
// the renderers are tested against, and a way for the compiler core to check a lowered
// program without a C compiler. f32 arithmetic is done in float with libm (the CPU
// renderer uses the prelude's approximations instead, so compare within tolerance);
// GEMM dot products accumulate in double. Every load and store is bounds-checked against
// its buffer's element count: an out-of-range index is an InternalError, not a crash.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "kernel/kernel_ir.hpp"

namespace luminal::kernel {

/// Runs every kernel of `p` in order. `buffers[i]` points at buffer i's storage (f32:
/// float, f16/bf16: uint16_t bits, i32: int32_t, bool: uint8_t).
void evaluate(const Program& p, const std::vector<void*>& buffers,
              const std::map<std::string, int64_t>& symbols);

/// Host conversions with the same rounding as the C prelude (nearest even).
uint16_t f32_to_f16_bits(float f);
float f16_bits_to_f32(uint16_t h);
uint16_t f32_to_bf16_bits(float f);
float bf16_bits_to_f32(uint16_t h);

}  // namespace luminal::kernel
