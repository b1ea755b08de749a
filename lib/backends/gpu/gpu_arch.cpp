#include "backends/gpu/gpu_arch.hpp"

#include <cstdlib>

#include "luminal/error.hpp"

namespace luminal::gpu {

const char* dialect_name(Dialect d) { return d == Dialect::Cuda ? "cuda" : "hip"; }

GpuArch arch_for(const Target& t) {
  GpuArch a;
  if (t.kind() == Target::Kind::cuda) {
    a.dialect = Dialect::Cuda;
    a.arch = t.arch().empty() ? "sm_90" : t.arch();
    a.warp = 32;
    // "sm_90a" -> 90, "sm_100" -> 100
    a.sm_version = std::atoi(a.arch.c_str() + 3);
    a.mma_m16n8k16 = a.sm_version >= 80;
    a.async_copy = a.sm_version >= 80;
    a.max_static_shared = 48 * 1024;
    return a;
  }
  if (t.kind() == Target::Kind::hip) {
    a.dialect = Dialect::Hip;
    a.arch = t.arch().empty() ? "gfx90a" : t.arch();
    a.sm_version = 0;
    // CDNA (gfx9xx) executes wave64; RDNA (gfx10xx, gfx11xx, gfx12xx) wave32, which is
    // what hipRTC compiles for by default there.
    a.warp = a.arch.rfind("gfx9", 0) == 0 ? 64 : 32;
    a.mma_m16n8k16 = false;
    a.async_copy = false;
    a.mfma_f16 = a.arch == "gfx908" || a.arch == "gfx90a" || a.arch.rfind("gfx94", 0) == 0;
    a.mfma_bf16 = a.mfma_f16;
    a.mfma_bf16_1k = a.mfma_f16 && a.arch != "gfx908";
    a.wmma = a.arch.rfind("gfx11", 0) == 0;
    a.max_static_shared = 64 * 1024;
    return a;
  }
  throw CompileError("[gpu] " + t.to_string() + " is not a GPU target");
}

}  // namespace luminal::gpu
