// Helpers the GPU test files share.
#pragma once

#include "backends/gpu/gpu_arch.hpp"
#include "luminal/target.hpp"

namespace gpu_test {

/// The GPU architecture a target string names ("cuda:sm_90+emu", "hip:gfx90a", ...).
inline luminal::gpu::GpuArch arch_of(const char* target) {
  return luminal::gpu::arch_for(luminal::Target::parse(target));
}

}  // namespace gpu_test
