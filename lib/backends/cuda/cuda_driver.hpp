// The CUDA driver API through dlopen("libcuda.so.1"): only the entry points the runtime
// uses, declared by hand (no CUDA header is needed to build, nothing links the driver).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace luminal::cuda {

using CUdeviceptr = unsigned long long;
using CUresult = int;

struct Driver {
  CUresult (*cuInit)(unsigned) = nullptr;
  CUresult (*cuDriverGetVersion)(int*) = nullptr;
  CUresult (*cuDeviceGet)(int*, int) = nullptr;
  CUresult (*cuDeviceGetAttribute)(int*, int, int) = nullptr;
  CUresult (*cuDeviceGetName)(char*, int, int) = nullptr;
  CUresult (*cuDevicePrimaryCtxRetain)(void**, int) = nullptr;
  CUresult (*cuCtxSetCurrent)(void*) = nullptr;
  CUresult (*cuModuleLoadData)(void**, const void*) = nullptr;
  CUresult (*cuModuleUnload)(void*) = nullptr;
  CUresult (*cuModuleGetFunction)(void**, void*, const char*) = nullptr;
  CUresult (*cuMemAlloc)(CUdeviceptr*, size_t) = nullptr;            // cuMemAlloc_v2
  CUresult (*cuMemFree)(CUdeviceptr) = nullptr;                      // cuMemFree_v2
  CUresult (*cuMemAllocHost)(void**, size_t) = nullptr;              // cuMemAllocHost_v2
  CUresult (*cuMemFreeHost)(void*) = nullptr;
  CUresult (*cuMemcpyHtoDAsync)(CUdeviceptr, const void*, size_t, void*) = nullptr;  // _v2
  CUresult (*cuMemcpyDtoHAsync)(void*, CUdeviceptr, size_t, void*) = nullptr;        // _v2
  CUresult (*cuStreamCreate)(void**, unsigned) = nullptr;
  CUresult (*cuStreamSynchronize)(void*) = nullptr;
  CUresult (*cuLaunchKernel)(void*, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, void*,
                             void**, void**) = nullptr;
  CUresult (*cuStreamBeginCapture)(void*, int) = nullptr;  // _v2
  CUresult (*cuStreamEndCapture)(void*, void**) = nullptr;
  CUresult (*cuGraphInstantiate)(void**, void*, unsigned long long) = nullptr;  // WithFlags
  CUresult (*cuGraphLaunch)(void*, void*) = nullptr;
  CUresult (*cuGraphExecDestroy)(void*) = nullptr;
  CUresult (*cuGraphDestroy)(void*) = nullptr;
  CUresult (*cuGetErrorString)(CUresult, const char**) = nullptr;

  /// The process-wide driver (cuInit done), or null with `why` set.
  static const Driver* get(std::string* why = nullptr);
  /// Throws RuntimeError "[cuda] <what>: <driver's message>" unless rc is CUDA_SUCCESS.
  void check(CUresult rc, const char* what) const;
};

}  // namespace luminal::cuda
