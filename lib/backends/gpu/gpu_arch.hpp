// One GPU architecture as the renderer and the emulator see it: the dialect (CUDA or
// HIP), the warp (wavefront) width, whether tensor-core helpers exist, and the per-block
// limits a schedule must respect. The cost model's throughput figures live in
// lib/cost/target_desc (one table for every GPU).
#pragma once

#include <cstdint>
#include <string>

#include "luminal/target.hpp"

namespace luminal::gpu {

enum class Dialect : uint8_t { Cuda, Hip };

struct GpuArch {
  Dialect dialect = Dialect::Cuda;
  std::string arch = "sm_90";  ///< "sm_80", "sm_90", "gfx90a", "gfx1030"
  int warp = 32;               ///< 32 on NVIDIA and RDNA, 64 on CDNA (gfx9xx)
  int sm_version = 90;         ///< CUDA compute capability x 10; 0 on HIP
  /// mma.sync m16n8k16 (f16/bf16 in, f32 accumulate): sm_80 and later.
  bool mma_m16n8k16 = true;
  /// cp.async (global -> shared copies that bypass the registers) and ldmatrix (a warp's
  /// fragments from shared memory in one instruction): sm_80 and later.
  bool async_copy = true;
  /// MFMA v_mfma_f32_16x16x16f16 (wave64, f16 in, f32 accumulate): CDNA gfx908 and later;
  /// bf16 too: v_mfma_f32_16x16x16bf16_1k from gfx90a, and on gfx908, which cannot select
  /// the _1k form (LLVM aborts the process), two v_mfma_f32_16x16x8bf16 (mfma_bf16_1k false).
  bool mfma_f16 = false;
  bool mfma_bf16 = false;
  bool mfma_bf16_1k = false;
  /// WMMA v_wmma_f32_16x16x16_f16 / _bf16 (wave32, f16/bf16 in, f32 accumulate): RDNA3
  /// (gfx11xx). gfx12 has WMMA with another lane layout and other builtins: not this one.
  bool wmma = false;
  int max_static_shared = 48 * 1024;  ///< static __shared__ / LDS bytes per block
  int max_threads_per_block = 1024;
};

/// The architecture of a CUDA or HIP target (its arch, or the default sm_90 / gfx90a).
/// Throws CompileError for other kinds.
GpuArch arch_for(const Target& t);

/// "cuda" / "hip".
const char* dialect_name(Dialect d);

}  // namespace luminal::gpu
