#include "cost/cost_model.hpp"

#include "cost/gpu_cost.hpp"
#include "cost/gpu_launch.hpp"

#include <algorithm>
#include <cmath>

namespace luminal::detail {

namespace {

// A concat B (matmul-siblings) is copied into one buffer first, by a kernel of its own,
// on a GPU but by the skinny GEMM, which reads each segment where it lies
// (gpu_renderer.cpp).
bool gpu_concat_copied(const TargetDesc& t, const KernelWork& w) {
  return t.warp > 1 && w.bytes_concat > 0 && !skinny_launch(w.launch);
}

}  // namespace

int priced_launches(const TargetDesc& t, const KernelWork& w) {
  return 1 + static_cast<int>(w.staged_kernels) + (gpu_concat_copied(t, w) ? 1 : 0);
}

double kernel_seconds(const TargetDesc& t, const KernelWork& w) {
  if (t.warp > 1) {
    if (!gpu_concat_copied(t, w)) return gpu_kernel_seconds(t, w);
    KernelWork copied = w;
    copied.bytes_read += 2 * w.bytes_concat;
    copied.staged_kernels += 1;
    return gpu_kernel_seconds(t, copied);
  }
  // Too little independent work leaves cores (SMs) idle: scale the usable peak down.
  double lanes = static_cast<double>(t.compute_units) * t.simd_lanes_f32;
  double occupancy = std::clamp(w.parallelism / lanes, 1.0 / lanes, 1.0);
  double flops = w.flops + w.transcendentals * t.transcendental_flops;
  double engine = w.engine == KernelWork::Engine::GeneratedGemm ? t.gemm_efficiency
                  : w.engine == KernelWork::Engine::LibraryGemm ? t.library_gemm_efficiency
                  : w.engine == KernelWork::Engine::Attention   ? t.attention_efficiency
                                                                 : t.loop_efficiency;
  double tile = 1;
  if (w.tile_area > 0) {
    double largest = w.tile_area;
    for (const auto& tile_dims : t.gemm_tiles)
      largest = std::max(largest, static_cast<double>(tile_dims[0] * tile_dims[1]));
    tile = std::clamp(1 - 0.1 * std::log2(largest / w.tile_area), 0.5, 1.0);
  }
  double efficiency = std::max(engine * w.engine_fraction * tile, 0.01);
  double compute_s = flops / (t.peak_flops_f32 * efficiency * occupancy);
  auto stream_s = [&](double b) { return stream_seconds(t, b); };
  const double bytes = w.bytes_read + w.bytes_written;
  double memory_s = traffic_seconds(t, w);
  if (!leaves_stream_from_memory(w) && bytes > t.llc_bytes && !w.read_buffers.empty()) {
    // Too much traffic to stay in cache as a whole, and the leaves may stay there between
    // calls: the buffers that fit by themselves (activations beside weights) still come
    // from cache, the rest from memory.
    memory_s = 0;
    double listed = 0;
    for (double b : w.read_buffers) {
      memory_s += stream_s(b);
      listed += b;
    }
    memory_s += std::max(w.bytes_read - listed, 0.0) / t.mem_bandwidth;
    memory_s += stream_s(w.bytes_written);
  }
  // A kernel's scratch stays in cache when it fits, even beside a stream of weights.
  if (w.bytes_scratch > 0) memory_s += stream_s(w.bytes_scratch);
  if (w.engine == KernelWork::Engine::Collective)  // the link, then the local sum/copy
    return w.link_steps * t.link.latency_s + w.link_bytes / t.link.bandwidth + memory_s + t.launch_overhead_s;
  return std::max(compute_s, memory_s) + t.launch_overhead_s;
}

}  // namespace luminal::detail
