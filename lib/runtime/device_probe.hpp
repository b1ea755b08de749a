// Whether a GPU driver and device are present, found at run time with dlopen: Luminal
// never links libcuda or libamdhip64, so it starts on machines without them.
#pragma once

#include <string>

namespace luminal::detail {

struct DeviceProbe {
  int count = 0;      ///< devices found
  std::string error;  ///< why none could be counted ("" when the driver answered)
};

/// libcuda.so.1 -> cuInit -> cuDeviceGetCount, probed once per process.
const DeviceProbe& cuda_probe();
/// libamdhip64 -> hipGetDeviceCount, probed once per process.
const DeviceProbe& hip_probe();

/// Number of CUDA devices (0 when libcuda.so.1 does not load or cuInit fails).
int cuda_device_count();
/// Number of HIP devices (0 when libamdhip64.so does not load).
int hip_device_count();

/// Whether this build runs generated kernels on the device itself (not only compiles
/// them, or runs them on the host emulator). Without it Target::best() never picks the
/// GPU. Both run on the shared device runtime (backends/gpu/device_executable.hpp): CUDA
/// on the driver API, HIP on the HIP runtime API.
constexpr bool has_cuda_codegen() { return true; }
constexpr bool has_hip_codegen() { return true; }

}  // namespace luminal::detail
