// Whether a GPU driver and device are present, found at run time with dlopen: Luminal
// never links libcuda or libamdhip64, so it starts on machines without them.
#pragma once

namespace luminal::detail {

/// Number of CUDA devices (0 when libcuda.so.1 does not load or cuInit fails).
int cuda_device_count();
/// Number of HIP devices (0 when libamdhip64.so does not load).
int hip_device_count();

/// Whether this build generates device code for CUDA / HIP. Without it a GPU target runs
/// its kernels on the host interpreter (much slower than the CPU backend), so
/// Target::best() does not pick it. No GPU code generator is built yet.
constexpr bool has_cuda_codegen() { return false; }
constexpr bool has_hip_codegen() { return false; }

}  // namespace luminal::detail
