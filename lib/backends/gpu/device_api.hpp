// What the device runtime (device_executable.hpp) needs from a GPU driver API, so one
// executable serves the CUDA driver and the HIP runtime alike. Handles are opaque
// pointers and device addresses 64-bit integers, as in both APIs; every call that can
// fail throws RuntimeError "[cuda] <what>: <driver's message>" (or "[hip] ...").
// Implementations: backends/cuda/cuda_driver.hpp, backends/hip/hip_driver.hpp.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "luminal/error.hpp"

namespace luminal::gpu {

struct BlasCall;  // gpu/blas_gemm.hpp

class DeviceApi {
 public:
  virtual ~DeviceApi() = default;

  /// "cuda" or "hip": the prefix of every message.
  virtual const char* name() const = 0;
  /// The device's architecture as targets spell it ("sm_90", "gfx90a").
  virtual std::string arch(int device) const = 0;
  /// Makes `device` current on the calling thread (CUDA: its primary context).
  virtual void make_current(int device) const = 0;

  virtual void* load_module(const std::string& image) const = 0;
  virtual void unload_module(void* module) const noexcept = 0;
  virtual void* function(void* module, const std::string& kernel) const = 0;

  virtual std::uint64_t alloc(std::size_t bytes) const = 0;
  virtual void free(std::uint64_t ptr) const noexcept = 0;
  /// Page-locked host memory, so copies are asynchronous DMA.
  virtual void* alloc_pinned(std::size_t bytes) const = 0;
  virtual void free_pinned(void* ptr) const noexcept = 0;

  virtual void* create_stream() const = 0;
  virtual void destroy_stream(void* stream) const noexcept = 0;
  virtual void copy_in(std::uint64_t dst, const void* src, std::size_t bytes, void* stream) const = 0;
  virtual void copy_out(void* dst, std::uint64_t src, std::size_t bytes, void* stream) const = 0;
  /// Device to device (an input a program passes through to an output, in caller memory).
  virtual void copy_device(std::uint64_t dst, std::uint64_t src, std::size_t bytes, void* stream) const = 0;
  /// `args`: one pointer per kernel parameter, in order. `what` names the kernel in errors.
  virtual void launch(void* fn, const unsigned grid[3], const unsigned block[3], void** args, void* stream,
                      const char* what) const = 0;
  virtual void synchronize(void* stream, const char* what) const = 0;

  /// Events order work across streams without the host waiting: a call queued on a
  /// caller's stream and the next on another both use the executable's arena.
  virtual void* create_event() const = 0;
  virtual void destroy_event(void* event) const noexcept = 0;
  /// The event completes when everything queued on `stream` so far has.
  virtual void record_event(void* event, void* stream) const = 0;
  /// What is queued on `stream` from now on waits for the event's last record.
  virtual void wait_event(void* stream, void* event) const = 0;

  /// Records what is queued on `stream` until end_capture into a graph that replays it
  /// with one call. An API without capture returns false and the executable queues the
  /// same work directly on every call.
  virtual bool begin_capture(void* stream) const = 0;
  /// The instantiated graph (throws; the capture is ended either way).
  virtual void* end_capture(void* stream) const = 0;
  /// Ends a capture that failed part-way and drops what it recorded.
  virtual void abort_capture(void* stream) const noexcept = 0;
  virtual void launch_graph(void* graph, void* stream) const = 0;
  virtual void destroy_graph(void* graph) const noexcept = 0;

  /// The vendor BLAS that runs library GEMM kernels (gpu/blas_gemm.hpp), e.g. "cuBLASLt
  /// 13.1.0"; empty when the API has none (the runtime then generates those GEMMs), with
  /// `why` set.
  virtual std::string blas(std::string* why = nullptr) const {
    if (why) *why = std::string(name()) + " has no BLAS";
    return {};
  }
  /// Device bytes of workspace each stream's BLAS calls are given.
  virtual std::size_t blas_workspace() const { return 0; }
  /// `c` on `stream` (`device` current), A, B and D at these addresses (the call's
  /// offsets applied), `workspace` of blas_workspace() bytes.
  virtual void blas_gemm(int /*device*/, const BlasCall& /*c*/, std::uint64_t /*a*/, std::uint64_t /*b*/,
                         std::uint64_t /*d*/, std::uint64_t /*workspace*/, void* /*stream*/) const {
    throw InternalError(std::string("[") + name() + "] blas_gemm without a BLAS");
  }
};

}  // namespace luminal::gpu
