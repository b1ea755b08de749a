#include "backends/cuda/cuda_driver.hpp"

#include <dlfcn.h>

#include <mutex>

#include "luminal/error.hpp"

namespace luminal::cuda {

namespace {
template <class F>
bool bind(void* h, const char* name, F& f) {
  f = reinterpret_cast<F>(dlsym(h, name));
  return f != nullptr;
}
}  // namespace

const Driver* Driver::get(std::string* why) {
  static std::once_flag once;
  static Driver* instance = nullptr;
  static std::string failure;
  std::call_once(once, [] {
    void* h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);  // stays loaded: drivers are not unloaded
    if (!h) {
      failure = "the CUDA driver (libcuda.so.1) is not installed";
      return;
    }
    auto* d = new Driver();  // never destroyed, like the driver itself
    const bool ok =
        bind(h, "cuInit", d->cuInit) && bind(h, "cuDriverGetVersion", d->cuDriverGetVersion) &&
        bind(h, "cuDeviceGet", d->cuDeviceGet) && bind(h, "cuDeviceGetAttribute", d->cuDeviceGetAttribute) &&
        bind(h, "cuDeviceGetName", d->cuDeviceGetName) &&
        bind(h, "cuDevicePrimaryCtxRetain", d->cuDevicePrimaryCtxRetain) &&
        bind(h, "cuCtxSetCurrent", d->cuCtxSetCurrent) && bind(h, "cuModuleLoadData", d->cuModuleLoadData) &&
        bind(h, "cuModuleUnload", d->cuModuleUnload) && bind(h, "cuModuleGetFunction", d->cuModuleGetFunction) &&
        bind(h, "cuMemAlloc_v2", d->cuMemAlloc) && bind(h, "cuMemFree_v2", d->cuMemFree) &&
        bind(h, "cuMemAllocHost_v2", d->cuMemAllocHost) && bind(h, "cuMemFreeHost", d->cuMemFreeHost) &&
        bind(h, "cuMemcpyHtoDAsync_v2", d->cuMemcpyHtoDAsync) &&
        bind(h, "cuMemcpyDtoHAsync_v2", d->cuMemcpyDtoHAsync) && bind(h, "cuStreamCreate", d->cuStreamCreate) &&
        bind(h, "cuStreamSynchronize", d->cuStreamSynchronize) && bind(h, "cuLaunchKernel", d->cuLaunchKernel) &&
        bind(h, "cuStreamBeginCapture_v2", d->cuStreamBeginCapture) &&
        bind(h, "cuStreamEndCapture", d->cuStreamEndCapture) &&
        bind(h, "cuGraphInstantiateWithFlags", d->cuGraphInstantiate) &&
        bind(h, "cuGraphLaunch", d->cuGraphLaunch) && bind(h, "cuGraphExecDestroy", d->cuGraphExecDestroy) &&
        bind(h, "cuGraphDestroy", d->cuGraphDestroy) && bind(h, "cuGetErrorString", d->cuGetErrorString);
    if (!ok) {
      failure = "libcuda.so.1 lacks entry points the runtime needs (a driver older than CUDA 11.4?)";
      delete d;
      return;
    }
    if (CUresult rc = d->cuInit(0); rc != 0) {
      failure = "cuInit failed with CUresult " + std::to_string(rc);
      delete d;
      return;
    }
    instance = d;
  });
  if (!instance && why) *why = failure;
  return instance;
}

void Driver::check(CUresult rc, const char* what) const {
  if (rc == 0) return;
  const char* msg = nullptr;
  cuGetErrorString(rc, &msg);
  throw RuntimeError(std::string("[cuda] ") + what + ": " + (msg ? msg : "error " + std::to_string(rc)));
}

}  // namespace luminal::cuda
