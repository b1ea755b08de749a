// Whether a GPU driver and device are present, found at run time with dlopen: Luminal
// never links libcuda or libamdhip64, so it starts on machines without them.
#pragma once

namespace luminal::detail {

/// Number of CUDA devices (0 when libcuda.so.1 does not load or cuInit fails).
int cuda_device_count();
/// Number of HIP devices (0 when libamdhip64.so does not load).
int hip_device_count();

}  // namespace luminal::detail
