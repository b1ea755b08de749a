#include "runtime/device_probe.hpp"

#include <dlfcn.h>

namespace luminal::detail {

namespace {
// The driver entry points, declared by hand so no GPU header is needed to build.
using CuInit = int (*)(unsigned int);
using CuDeviceGetCount = int (*)(int*);
using HipGetDeviceCount = int (*)(int*);

int probe_cuda() {
  void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!lib) return 0;
  auto init = reinterpret_cast<CuInit>(dlsym(lib, "cuInit"));
  auto count = reinterpret_cast<CuDeviceGetCount>(dlsym(lib, "cuDeviceGetCount"));
  int n = 0;
  if (!init || !count || init(0) != 0 || count(&n) != 0) n = 0;
  // The library stays loaded: the CUDA backend will use it, and unloading a driver is
  // not safe once initialised.
  return n;
}

int probe_hip() {
  void* lib = dlopen("libamdhip64.so", RTLD_NOW | RTLD_LOCAL);
  if (!lib) lib = dlopen("libamdhip64.so.6", RTLD_NOW | RTLD_LOCAL);
  if (!lib) return 0;
  auto count = reinterpret_cast<HipGetDeviceCount>(dlsym(lib, "hipGetDeviceCount"));
  int n = 0;
  if (!count || count(&n) != 0) n = 0;
  return n;
}
}  // namespace

int cuda_device_count() {
  static const int n = probe_cuda();  // thread-safe, probed once
  return n;
}

int hip_device_count() {
  static const int n = probe_hip();
  return n;
}

}  // namespace luminal::detail
