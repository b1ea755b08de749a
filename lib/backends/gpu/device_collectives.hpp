// A collective's local steps on a GPU (dist::LocalOps), for communicators whose buffers are
// device memory (NCCL): the ordered sum of the ranks' blocks and the row copies (packing,
// interleaving, zero padding) as device kernels on the program's stream, scratch in device
// memory. dist::run_collective drives them with the same algorithm as on the host, so the
// bits are the host path's (and the interpreter's).
#pragma once

#include <cstddef>
#include <cstdint>

#include "backends/gpu/device_api.hpp"
#include "backends/gpu/gpu_renderer.hpp"
#include "compiler/plan.hpp"
#include "dist/collectives.hpp"

namespace luminal::gpu {

/// Whether `plan` has collective steps.
bool has_collectives(const compiler::KernelPlan& plan);

/// Appends the kernels DeviceLocalOps launches (lm_coll_sum_f32, lm_coll_sum_i32,
/// lm_coll_copy; both dialects) to `src`'s kernels; emulation_source then gives them host
/// entries too.
void add_collective_kernels(GpuSource& src);

/// The host entries of those kernels for the emulator (emulation_source appends them).
const char* collective_kernel_entries();

class DeviceLocalOps final : public dist::LocalOps {
 public:
  /// `module`: loaded from a source that has the collective kernels; `stream`: the
  /// program's (the steps queue behind its kernels).
  DeviceLocalOps(const DeviceApi& api, void* module, void* stream);
  ~DeviceLocalOps() override;
  DeviceLocalOps(const DeviceLocalOps&) = delete;
  DeviceLocalOps& operator=(const DeviceLocalOps&) = delete;

  std::byte* scratch(std::size_t bytes) override;
  void sum_in_rank_order(DType dt, const std::byte* blocks, std::size_t world, int64_t n,
                         std::byte* dst) override;
  void copy_rows(std::byte* dst, const std::byte* src, std::size_t row, std::size_t outer, std::size_t world,
                 std::size_t dq, std::size_t dout, std::size_t sq, std::size_t so) override;
  void before_communicator() override;

 private:
  void launch(void* fn, const char* name, int64_t work, std::initializer_list<uint64_t> params);
  const DeviceApi& api_;
  void* stream_;
  void* sum_f32_;
  void* sum_i32_;
  void* copy_;
  void* copy4_;
  uint64_t scratch_ = 0;
  std::size_t capacity_ = 0;
};

}  // namespace luminal::gpu
