// The HIP runtime API through dlopen (libamdhip64.so.6/.5, the library that also holds
// hipRTC): only the entry points the GPU runtime uses, declared by hand (no HIP header is
// needed to build, nothing links it), and the shared GPU runtime's DeviceApi on top.
//
// The program is captured once per binding as a hipGraph and replayed, as on CUDA, where
// the runtime's graph API is trusted: ROCm 6 and later by default; on ROCm 5, whose
// headers mark the API beta, only with LUMINAL_HIP_GRAPHS=1 (=0 turns it off anywhere).
// Any failure to capture or instantiate falls back to launching the kernels directly on
// every call, which every HIP version supports. (Neither path has run on an AMD device
// from here.)
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "backends/gpu/device_api.hpp"

namespace luminal::hip {

using hipError = int;

struct Driver final : gpu::DeviceApi {
  hipError (*hipInit)(unsigned) = nullptr;
  hipError (*hipGetDeviceCount)(int*) = nullptr;
  hipError (*hipGetDeviceProperties)(void*, int) = nullptr;  // the ROCm 5 layout (R0000)
  hipError (*hipSetDevice)(int) = nullptr;
  hipError (*hipModuleLoadData)(void**, const void*) = nullptr;
  hipError (*hipModuleUnload)(void*) = nullptr;
  hipError (*hipModuleGetFunction)(void**, void*, const char*) = nullptr;
  hipError (*hipMalloc)(void**, size_t) = nullptr;
  hipError (*hipFree)(void*) = nullptr;
  hipError (*hipHostMalloc)(void**, size_t, unsigned) = nullptr;
  hipError (*hipHostFree)(void*) = nullptr;
  hipError (*hipMemcpyHtoDAsync)(void*, const void*, size_t, void*) = nullptr;
  hipError (*hipMemcpyDtoHAsync)(void*, void*, size_t, void*) = nullptr;
  hipError (*hipMemcpyDtoDAsync)(void*, void*, size_t, void*) = nullptr;
  hipError (*hipEventCreateWithFlags)(void**, unsigned) = nullptr;
  hipError (*hipEventDestroy)(void*) = nullptr;
  hipError (*hipEventRecord)(void*, void*) = nullptr;
  hipError (*hipStreamWaitEvent)(void*, void*, unsigned) = nullptr;
  hipError (*hipStreamCreateWithFlags)(void**, unsigned) = nullptr;
  hipError (*hipStreamDestroy)(void*) = nullptr;
  hipError (*hipStreamSynchronize)(void*) = nullptr;
  hipError (*hipModuleLaunchKernel)(void*, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                                    void*, void**, void**) = nullptr;
  const char* (*hipGetErrorString)(hipError) = nullptr;
  // Graph capture (optional: bound when the runtime has them; `graphs` says whether used).
  hipError (*hipStreamBeginCapture)(void*, int) = nullptr;
  hipError (*hipStreamEndCapture)(void*, void**) = nullptr;
  hipError (*hipGraphInstantiate)(void**, void*, void**, char*, size_t) = nullptr;
  hipError (*hipGraphLaunch)(void*, void*) = nullptr;
  hipError (*hipGraphExecDestroy)(void*) = nullptr;
  hipError (*hipGraphDestroy)(void*) = nullptr;
  bool graphs = false;

  /// Binds the graph-capture entry points from a dlopen'ed libamdhip64; false (and none
  /// bound) when one is missing.
  static bool bind_graph_api(void* handle, Driver& d);
  /// Whether to capture: LUMINAL_HIP_GRAPHS ("0"/"1") when set, else runtime major >= 6.
  static bool graphs_wanted(int runtime_major, const char* env);

  /// Where gcnArchName ("gfx90a:sramecc+:xnack-") lies in hipDeviceProp_t as ROCm 5
  /// lays it out; ROCm 6 keeps that layout for the unversioned hipGetDeviceProperties.
  /// tests/gpu/hip_driver_test.cpp checks it against the installed header.
  static constexpr std::size_t kGcnArchNameOffset = 396;

  /// The process-wide runtime (hipInit done), or null with `why` set.
  static const Driver* get(std::string* why = nullptr);
  /// Throws RuntimeError "[hip] <what>: <runtime's message>" unless rc is hipSuccess.
  void check(hipError rc, const char* what) const;

  // gpu::DeviceApi
  const char* name() const override { return "hip"; }
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
};

/// The architecture in a gcnArchName: "gfx90a:sramecc+:xnack-" -> "gfx90a"; "" when the
/// bytes are not one (a layout this build does not know).
std::string arch_from_gcn_name(const char* bytes, std::size_t max_len);

}  // namespace luminal::hip
