// The CUDA driver API through dlopen("libcuda.so.1"): only the entry points the runtime
// uses, declared by hand (no CUDA header is needed to build, nothing links the driver),
// and the shared GPU runtime's DeviceApi on top of them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>

#include "backends/gpu/device_api.hpp"

namespace luminal::cuda {

using CUdeviceptr = unsigned long long;
using CUresult = int;

struct Driver final : gpu::DeviceApi {
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
  CUresult (*cuMemcpyDtoDAsync)(CUdeviceptr, CUdeviceptr, size_t, void*) = nullptr;  // _v2
  CUresult (*cuEventCreate)(void**, unsigned) = nullptr;
  CUresult (*cuEventDestroy)(void*) = nullptr;  // _v2
  CUresult (*cuEventRecord)(void*, void*) = nullptr;
  CUresult (*cuStreamWaitEvent)(void*, void*, unsigned) = nullptr;
  CUresult (*cuStreamCreate)(void**, unsigned) = nullptr;
  CUresult (*cuStreamSynchronize)(void*) = nullptr;
  CUresult (*cuStreamDestroy)(void*) = nullptr;  // _v2
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

  // gpu::DeviceApi
  const char* name() const override { return "cuda"; }
  std::string arch(int device) const override;
  void make_current(int device) const override;
  void* load_module(const std::string& image) const override;
  void unload_module(void* module) const noexcept override;
  void* function(void* module, const std::string& kernel) const override;
  std::uint64_t alloc(std::size_t bytes) const override;
  void free(std::uint64_t ptr) const noexcept override;
  void* alloc_pinned(std::size_t bytes) const override;
  void free_pinned(void* ptr) const noexcept override;
  void* create_stream() const override;
  void destroy_stream(void* stream) const noexcept override;
  void copy_in(std::uint64_t dst, const void* src, std::size_t bytes, void* stream) const override;
  void copy_out(void* dst, std::uint64_t src, std::size_t bytes, void* stream) const override;
  void copy_device(std::uint64_t dst, std::uint64_t src, std::size_t bytes, void* stream) const override;
  void launch(void* fn, const unsigned grid[3], const unsigned block[3], void** args, void* stream,
              const char* what) const override;
  void synchronize(void* stream, const char* what) const override;
  void* create_event() const override;
  void destroy_event(void* event) const noexcept override;
  void record_event(void* event, void* stream) const override;
  void wait_event(void* stream, void* event) const override;
  bool begin_capture(void* stream) const override;
  void* end_capture(void* stream) const override;
  void abort_capture(void* stream) const noexcept override;
  void launch_graph(void* graph, void* stream) const override;
  void destroy_graph(void* graph) const noexcept override;
  // cuBLASLt (cuda/cublaslt.hpp), when it loads
  std::string blas(std::string* why = nullptr) const override;
  std::size_t blas_workspace() const override;
  void blas_gemm(int device, const gpu::BlasCall& c, std::uint64_t a, std::uint64_t b, std::uint64_t d,
                 std::uint64_t workspace, void* stream) const override;

 private:
  mutable std::mutex ctx_mu_;
  mutable std::map<int, void*> primary_ctx_;  // retained once per device, never released
};

}  // namespace luminal::cuda
