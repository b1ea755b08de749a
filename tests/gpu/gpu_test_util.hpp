// Helpers the GPU test files share.
#pragma once

#include <catch2/catch.hpp>

#include <string>

#include "backends/cuda/cuda_module.hpp"
#include "backends/gpu/gpu_arch.hpp"
#include "luminal/target.hpp"

namespace gpu_test {

/// The GPU architecture a target string names ("cuda:sm_90+emu", "hip:gfx90a", ...).
inline luminal::gpu::GpuArch arch_of(const char* target) {
  return luminal::gpu::arch_for(luminal::Target::parse(target));
}

/// Whether NVRTC can be loaded here; if not, the calling test says so (a WARN) and skips.
inline bool have_nvrtc() {
  std::string why;
  if (luminal::cuda::nvrtc_available(&why)) return true;
  WARN("NVRTC is not available here (" << why << "); skipped");
  return false;
}

}  // namespace gpu_test
