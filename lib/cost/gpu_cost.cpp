#include "cost/gpu_cost.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

namespace luminal::detail {

int resident_blocks(const TargetDesc& t, const GpuBlock& b) {
  if (b.threads <= 0) return 0;
  int n = t.max_blocks_per_unit > 0 ? t.max_blocks_per_unit : 32;
  if (t.max_threads_per_unit > 0) n = std::min(n, t.max_threads_per_unit / b.threads);
  if (t.regs_per_unit > 0) n = std::min(n, t.regs_per_unit / std::max(1, b.registers * b.threads));
  if (b.shared_bytes > 0 && t.local_bytes > 0)
    n = std::min(n, static_cast<int>(t.local_bytes / b.shared_bytes));
  return std::max(n, 0);
}

GpuBlock gemm_block(int64_t bm, int64_t bn, int64_t bk) {
  GpuBlock b;
  b.threads = 256;
  const int64_t acc = bm * bn / 256;
  b.registers = static_cast<int>(acc + bm / 16 + bn / 16 + 32);
  b.shared_bytes = static_cast<int>((bm + bn) * bk * 4);
  return b;
}

double gpu_kernel_seconds(const TargetDesc& t, const KernelWork& w) {
  const double inf = std::numeric_limits<double>::infinity();
  const double units = std::max(1, t.compute_units);
  const double flops = w.flops + w.transcendentals * t.transcendental_flops;
  const double bytes = w.bytes_read + w.bytes_written;
  double bw = bytes <= t.llc_bytes ? t.cache_bandwidth : t.mem_bandwidth;
  double efficiency = t.loop_efficiency;
  double peak = t.peak_flops_f32;
  double blocks = 1;
  GpuBlock block;

  if (w.engine == KernelWork::Engine::GeneratedGemm && w.gemm_m > 0) {
    // Without a launch alternative the renderer uses its default tile, 64 x 64 x 16.
    const std::vector<int64_t> tile = w.launch.size() == 3 ? w.launch : std::vector<int64_t>{64, 64, 16};
    const double bm = static_cast<double>(tile[0]), bn = static_cast<double>(tile[1]);
    block = gemm_block(tile[0], tile[1], tile[2]);
    blocks = std::ceil(w.gemm_m / bm) * std::ceil(w.gemm_n / bn) * std::max(1.0, w.batches);
    // Shared tiles make each loaded element serve bn (A) or bm (B) products; what the
    // tiles re-read comes from L2.
    const double reread = 4.0 * w.gemm_k * std::max(1.0, w.batches) *
                          (w.gemm_m * std::ceil(w.gemm_n / bn) + w.gemm_n * std::ceil(w.gemm_m / bm));
    bw = std::min(bw, t.cache_bandwidth);
    // Each thread's (bm/16) x (bn/16) micro tile does tm*tn FMAs per tm + tn shared-memory
    // loads; an SM issues about 4 f32 FMAs per shared word it can read, so small micro
    // tiles wait on shared memory (1x1: an eighth of peak, 8x8: all of it).
    const double tm = bm / 16, tn = bn / 16;
    const double smem_bound = std::min(1.0, tm * tn / (tm + tn) / 4.0);
    const double fill = (w.gemm_m / (std::ceil(w.gemm_m / bm) * bm)) * (w.gemm_n / (std::ceil(w.gemm_n / bn) * bn));
    efficiency = t.gemm_efficiency * fill * smem_bound;
    // The generated GEMM computes in f32 FMAs (the kernel IR's GEMM operands are f32):
    // no tensor-core peak for it, whatever its operands held.
    const double memory_s = std::max(bytes / t.mem_bandwidth, reread / t.cache_bandwidth);
    const int resident = resident_blocks(t, block);
    if (resident == 0) return inf;
    // An SM hides latency with about 16 resident warps; fewer leave it waiting. With fewer
    // blocks than SMs some SMs idle; with more than fit at once the grid runs in waves,
    // the last one partly empty.
    const double warps_per_block = block.threads / static_cast<double>(std::max(1, t.warp));
    const double slots = units * resident;
    double utilization;
    if (blocks <= slots) {
      const double per_sm = std::max(1.0, std::ceil(blocks / units));
      utilization = std::min(1.0, blocks / units) * std::min(1.0, per_sm * warps_per_block / 16.0);
    } else {
      const double waves = std::ceil(blocks / slots);
      utilization = blocks / (waves * slots) * std::min(1.0, resident * warps_per_block / 16.0);
    }
    const double compute_s = flops / (peak * std::max(efficiency * utilization, 1e-4));
    return std::max(compute_s, memory_s) + t.launch_overhead_s;
  }

  if (w.engine == KernelWork::Engine::LibraryGemm) {
    efficiency = t.library_gemm_efficiency;
    if (w.half_operands && t.peak_flops_f16 > t.peak_flops_f32) peak = t.peak_flops_f16;
  } else if (w.engine == KernelWork::Engine::Attention) {
    efficiency = t.attention_efficiency;
  } else if (w.engine == KernelWork::Engine::GeneratedGemm) {
    efficiency = t.gemm_efficiency * w.engine_fraction * 0.5;  // no tile chosen yet
  }

  // Loops (elementwise, gather, reductions): threads over the work.
  double threads = std::max(1.0, w.parallelism);
  double coalesce = 1;
  if (w.rows > 0) {
    const double len = std::max(1.0, w.row_length);
    const int per = w.launch.size() == 1 ? static_cast<int>(w.launch[0]) : 3;  // 1 thread, 3 warp, 2 block
    const double lanes = per == 1 ? 1 : per == 2 ? 256 : t.warp;
    threads = w.rows * std::min(lanes, len);
    // A row per thread walks its own row: neighbouring threads touch addresses a row
    // apart, one useful element per 32-byte sector once rows exceed 8 floats.
    if (per == 1) coalesce = 1.0 / std::clamp(len, 1.0, 8.0);
    // The cross-lane tree and (per block) two barriers per row.
    const double tree = per == 1 ? 0 : std::log2(lanes) * (per == 2 ? 2 : 1);
    const double steps = std::ceil(len / lanes) + tree;
    const double active = std::min(threads, units * std::max(1, t.max_threads_per_unit));
    const double rounds = std::ceil(w.rows * std::min(lanes, len) / std::max(1.0, active));
    // ~4 cycles per step at ~1.5 GHz: the latency floor of a short, serial row.
    const double serial_s = rounds * steps * 4 / 1.5e9;
    const double compute_s = flops / (peak * efficiency * std::min(1.0, active / (units * t.warp * 4)));
    const double memory_s = bytes / (bw * coalesce);
    return std::max({compute_s, memory_s, serial_s}) + t.launch_overhead_s;
  }
  const double lanes = units * t.warp * 4;
  const double occupancy = std::clamp(threads / lanes, 1.0 / lanes, 1.0);
  const double compute_s = flops / (peak * std::max(efficiency, 0.01) * occupancy);
  const double memory_s = bytes / (bw * std::min(1.0, std::max(occupancy * 4, 0.05)));
  return std::max(compute_s, memory_s) + t.launch_overhead_s;
}

}  // namespace luminal::detail
