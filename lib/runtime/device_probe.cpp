#include "runtime/device_probe.hpp"

#include <dlfcn.h>

namespace luminal::detail {

namespace {
// The driver entry points, declared by hand so no GPU header is needed to build.
using CuInit = int (*)(unsigned int);
using CuDeviceGetCount = int (*)(int*);
using HipGetDeviceCount = int (*)(int*);

std::string dl_error(const char* what) {
  const char* e = dlerror();
  return std::string(what) + " not found" + (e ? std::string(": ") + e : std::string());
}

DeviceProbe probe_cuda() {
  DeviceProbe p;
  void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    p.error = dl_error("the CUDA driver (libcuda.so.1)");
    return p;
  }
  auto init = reinterpret_cast<CuInit>(dlsym(lib, "cuInit"));
  auto count = reinterpret_cast<CuDeviceGetCount>(dlsym(lib, "cuDeviceGetCount"));
  if (!init || !count) {
    p.error = "libcuda.so.1 lacks cuInit/cuDeviceGetCount";
    return p;
  }
  if (int rc = init(0); rc != 0) {
    p.error = "cuInit failed with CUresult " + std::to_string(rc) + (rc == 100 ? " (no CUDA-capable device)" : "");
    return p;
  }
  if (int rc = count(&p.count); rc != 0) {
    p.count = 0;
    p.error = "cuDeviceGetCount failed with CUresult " + std::to_string(rc);
  }
  // The library stays loaded: unloading a driver is not safe once initialised.
  return p;
}

DeviceProbe probe_hip() {
  DeviceProbe p;
  void* lib = dlopen("libamdhip64.so", RTLD_NOW | RTLD_LOCAL);
  if (!lib) lib = dlopen("libamdhip64.so.6", RTLD_NOW | RTLD_LOCAL);
  if (!lib) lib = dlopen("libamdhip64.so.5", RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    p.error = dl_error("the HIP runtime (libamdhip64.so)");
    return p;
  }
  auto count = reinterpret_cast<HipGetDeviceCount>(dlsym(lib, "hipGetDeviceCount"));
  if (!count) {
    p.error = "libamdhip64 lacks hipGetDeviceCount";
    return p;
  }
  if (int rc = count(&p.count); rc != 0) {
    p.count = 0;
    p.error = "hipGetDeviceCount failed with hipError " + std::to_string(rc) + (rc == 100 ? " (no device)" : "");
  }
  return p;
}
}  // namespace

const DeviceProbe& cuda_probe() {
  static const DeviceProbe p = probe_cuda();  // thread-safe, probed once
  return p;
}
const DeviceProbe& hip_probe() {
  static const DeviceProbe p = probe_hip();
  return p;
}
int cuda_device_count() { return cuda_probe().count; }
int hip_device_count() { return hip_probe().count; }

}  // namespace luminal::detail
