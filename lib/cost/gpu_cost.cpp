#include "cost/gpu_cost.hpp"

#include "cost/gpu_launch.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

namespace luminal::detail {

int resident_blocks(const TargetDesc& t, const GpuBlock& b) {
  if (b.threads <= 0) return 0;
  int n = t.max_blocks_per_unit > 0 ? t.max_blocks_per_unit : 32;
  if (t.max_threads_per_unit > 0) n = std::min(n, t.max_threads_per_unit / b.threads);
  if (t.max_registers_per_thread > 0 && b.registers > t.max_registers_per_thread) return 0;
  if (t.regs_per_unit > 0) n = std::min(n, t.regs_per_unit / std::max(1, b.registers * b.threads));
  if (b.shared_bytes > 0 && t.local_bytes > 0)
    n = std::min(n, static_cast<int>(t.local_bytes / b.shared_bytes));
  return std::max(n, 0);
}

GpuBlock matrix_gemm_block(const TargetDesc& t, int64_t bm, int64_t bn) {
  GpuBlock b;
  const int64_t mt = bm / 32, nt = bn / 32;
  b.shared_bytes = static_cast<int>((bm + bn) * 16 * 4);
  if (t.matrix_engine == 3) {
    // RDNA3's WMMA: 4 wavefronts of 32 (2 x 2), each a (bm/2) x (bn/2) tile of mt x nt
    // products, a lane holding 8 accumulators of each and 8 words of A and of B per row
    // and column tile. Clang 15 for gfx1100 (tests/gpu "[clang][wmma]"): 46 VGPRs at 32 x
    // 32, 95 (f16) and 111 (bf16) at 64 x 64 -- accumulators + fragments + about 48.
    b.threads = 128;
    b.registers = static_cast<int>(mt * nt * 8 + 8 * (mt + nt) + 48);
    return b;
  }
  // mma.sync (8 warps) and MFMA (4 wavefronts of 64): 256 threads, 4 accumulators a lane
  // per product. ptxas (NVRTC 13, -Xptxas=-v, sm_80 and sm_90) gives these kernels about
  // twice their accumulators plus 64: 194 registers at 128 x 128 (one block per SM), 96 at
  // 64 x 64 (tests/gpu "[nvrtc][mma]" prints them).
  b.threads = 256;
  b.registers = static_cast<int>(2 * (mt * nt * 4) + 64);
  return b;
}

GpuBlock gemm_block(int64_t bm, int64_t bn, int64_t bk) {
  GpuBlock b;
  b.threads = 256;
  const int64_t acc = bm * bn / 256;
  b.registers = static_cast<int>(acc + bm / 16 + bn / 16 + 32);
  b.shared_bytes = static_cast<int>((bm + bn) * bk * 4);
  return b;
}

GpuBlock mma_async_block(const GpuGemmLaunch& L) {
  GpuBlock b;
  b.threads = static_cast<int>((L.bm / L.wm) * (L.bn / L.wn) * 32);
  // ptxas (NVRTC 13, -Xptxas=-v; tests/gpu "[nvrtc][mma][skinny]", which holds the
  // resident blocks these give to those of the compiled kernels) gives these kernels about
  // twice their wm x wn / 32 accumulators plus 100, up to the 255 a thread may hold: on
  // sm_90 237-246 at 64x64 warps, 218-232 at 64x32 and 32x64, 169 at 32x32.
  b.registers = static_cast<int>(std::min<int64_t>(255, 2 * (L.wm * L.wn / 32) + 100));
  b.shared_bytes = static_cast<int>(mma_async_shared_bytes(L));
  return b;
}

namespace {

// Cycles of the SM clock the per-block estimates below count in (~1.6 GHz on the
// A100/H100/MI200 class; the tables state throughputs, not clocks).
constexpr double kClock = 1.6e9;

// Static shared memory a block may declare (the renderers' limit on CUDA).
constexpr int64_t kStaticSharedBytes = 48 * 1024;

// One block's time per K step when `resident` blocks share an SM: the SM's pipes are
// busy `work` seconds per block, and a block waits `latency` for its tile's loads (the
// kernel stages a tile, synchronizes, computes: no double buffering), which the other
// resident blocks' work hides.
double round_seconds(double work, double latency, double resident) {
  return std::max(resident * work, work + latency) / resident;
}

// Latency of a tile's loads: operands that fit in L2 come from it (~40% of the trip to
// HBM), larger ones from memory.
double load_latency(const TargetDesc& t, double bytes) {
  return bytes <= t.llc_bytes ? 0.4 * t.mem_latency_s : t.mem_latency_s;
}

// Blocks over SMs: the per-SM block count (the busiest SM) at `resident` at a time.
double per_sm_rounds(double blocks, double units, double resident, double& used) {
  const double per_sm = std::ceil(blocks / units);
  used = std::max(1.0, std::min(resident, per_sm));
  return std::ceil(per_sm / used);
}

// What the tensor-core GEMMs share once their work per block and K step of 32 is known:
// bm x bn tiles over the SMs at `resident` blocks each, every K step waiting for the
// part of its loads' latency that `latency_left` (given the whole latency) leaves, and
// the operands' bytes from memory and the tiles' re-reads from L2 (halves).
template <class LatencyLeft>
double matrix_tiles_seconds(const TargetDesc& t, const KernelWork& w, double bm, double bn, int resident,
                            double work, LatencyLeft latency_left) {
  const double units = std::max(1, t.compute_units);
  const double blocks = std::ceil(w.gemm_m / bm) * std::ceil(w.gemm_n / bn) * std::max(1.0, w.batches);
  double used = 1;
  const double rounds = per_sm_rounds(blocks, units, resident, used);
  const double ksteps = std::ceil(w.gemm_k / 32);
  const double bytes = w.bytes_read + w.bytes_written;
  const double compute_s =
      rounds * ksteps * round_seconds(work, latency_left(load_latency(t, bytes)), used) * used;
  const double reread = 2.0 * w.gemm_k * std::max(1.0, w.batches) *
                        (w.gemm_m * std::ceil(w.gemm_n / bn) + w.gemm_n * std::ceil(w.gemm_m / bm));
  const double memory_s = std::max(bytes / t.mem_bandwidth, reread / t.cache_bandwidth);
  return std::max(compute_s, memory_s) + t.launch_overhead_s;
}

// Tensor-core GEMM (mma.sync m16n8k16, gpu_renderer's gemm_mma): 8 warps in 2 x 4, each
// an (bm/2) x (bn/4) warp tile of mt x nt products; a K step of 32 stages (bm + bn) x 32
// halves as 32-bit k-pairs. Per block and K step the SM spends the larger of
//  * the tensor pipe: 2 bm bn 32 FLOPs at the SM's f16 matrix rate, and
//  * the fragment loads: 8 warps x 2 k16 steps x (4 mt + 2 nt) 32-bit shared loads at 32
//    words per cycle (no ldmatrix: this bounds a 128 x 128 tile near 2/3 of the peak),
// plus the staging: a load instruction per half (about 4 issue slots with its address
// and packing) or per 8 halves with 128-bit loads; then the memory latency of the
// stage, hidden only by other resident blocks. +inf without f16/bf16 operands or
// without the instruction.
double mma_gemm_seconds(const TargetDesc& t, const KernelWork& w, const GpuGemmLaunch& L) {
  const double inf = std::numeric_limits<double>::infinity();
  if (!w.half_operands || t.matrix_engine == 0 || L.bm % 32 != 0 || L.bn % 32 != 0) return inf;
  const double units = std::max(1, t.compute_units);
  const double bm = static_cast<double>(L.bm), bn = static_cast<double>(L.bn);
  const double mt = bm / 32, nt = bn / 32;
  const GpuBlock b = matrix_gemm_block(t, L.bm, L.bn);
  const int resident = resident_blocks(t, b);
  if (resident == 0) return inf;
  const double rate = t.peak_flops_f16 * (w.bf16_operands ? t.bf16_matrix_ratio : 1.0) * t.matrix_sync_ratio;
  const double tensor_s = 2 * bm * bn * 32 / (rate / units);
  // NVIDIA: 8 warps x 2 k16 steps x (4 mt + 2 nt) words a lane at 32 words a cycle; CDNA
  // (4 wavefronts of 64, each mt x nt MFMA 16x16 tiles): 4 x 2 k16 steps x 2 (mt + nt)
  // words a lane, a 64-lane load taking two cycles; RDNA3 (4 wavefronts of 32, each mt x nt
  // WMMA tiles): 4 x 2 k16 steps x 8 (mt + nt) words a lane (a lane holds a whole row of A
  // and column of B, both half-waves the same), a cycle per 32 lanes.
  const double frag_s = t.matrix_engine == 2   ? 4 * 2 * 2 * (mt + nt) * 2 / kClock
                        : t.matrix_engine == 3 ? 4 * 2 * 8 * (mt + nt) / kClock
                                               : 8 * 2 * (4 * mt + 2 * nt) / kClock;
  const double stage_loads = (bm + bn) * 32 / 32 / (L.vec > 1 ? 8 : 1);  // warp load instructions
  const double stage_s = stage_loads * 4 / 4 / kClock;                    // 4 slots each, 4 schedulers
  const double work = std::max(tensor_s, frag_s) + stage_s;
  return matrix_tiles_seconds(t, w, bm, bn, resident, work, [](double latency) { return latency; });
}

// Tensor-core GEMM fed by ldmatrix from a cp.async ring (gpu_renderer's gemm_mma_async,
// CUDA sm_80+): per block and K step of 32 the SM spends the larger of the tensor pipe
// (at the rate mma.sync reaches) and the fragment loads -- an ldmatrix.x4 moves 512 bytes
// in 4 cycles of the shared memory's 128 bytes a cycle; a warp issues wm/16 of them for A
// and wn/16 for B per k16 step -- plus the copies (a 16-byte cp.async a lane, about 2
// issue slots each). The ring keeps `stages` - 1 tiles in flight: a step waits only for
// the part of the load latency that the work of those steps does not cover, and other
// resident blocks hide that too.
double mma_async_gemm_seconds(const TargetDesc& t, const KernelWork& w, const GpuGemmLaunch& L) {
  const double inf = std::numeric_limits<double>::infinity();
  if (!w.half_operands || t.matrix_engine != 1 || L.wm <= 0 || L.wn <= 0 || L.wm % 16 != 0 ||
      L.wn % 16 != 0 || L.bm % L.wm != 0 || L.bn % L.wn != 0 || L.bm % 32 != 0 || L.bn % 32 != 0 ||
      (L.bm / L.wm) * (L.bn / L.wn) > 32 || mma_async_shared_bytes(L) > kStaticSharedBytes)
    return inf;
  const double units = std::max(1, t.compute_units);
  const double bm = static_cast<double>(L.bm), bn = static_cast<double>(L.bn);
  const double warps = (bm / static_cast<double>(L.wm)) * (bn / static_cast<double>(L.wn));
  const GpuBlock b = mma_async_block(L);
  const int resident = resident_blocks(t, b);
  if (resident == 0) return inf;
  const double rate = t.peak_flops_f16 * (w.bf16_operands ? t.bf16_matrix_ratio : 1.0) * t.matrix_sync_ratio;
  const double tensor_s = 2 * bm * bn * 32 / (rate / units);
  const double frag_s =
      warps * 2 * (static_cast<double>(L.wm) / 16 + static_cast<double>(L.wn) / 16) * 4 / kClock;
  const double stage_s = (bm + bn) * 4 / 32 * 2 / 4 / kClock;
  const double work = std::max(tensor_s, frag_s) + stage_s;
  const double stages = static_cast<double>(std::max<int64_t>(2, L.stages));
  return matrix_tiles_seconds(t, w, bm, bn, resident, work,
                              [&](double latency) { return std::max(0.0, latency - (stages - 1) * work); });
}

// Skinny GEMM (decode, M = 1..8: gpu_renderer's gemm_skinny): a block computes bm rows
// x bn columns, its 256 threads split ks ways along K, partials summed through shared
// memory. It streams B once: the time is B's bytes at the bandwidth the loads in flight
// sustain -- by Little's law an SM needs bandwidth/SMs x latency bytes in flight; each
// resident thread keeps about two loads of 2-4 bytes (scalar) or 16 bytes (128-bit) in
// flight -- and the FMAs, which run at the f32 rate.
double skinny_gemm_seconds(const TargetDesc& t, const KernelWork& w, const GpuGemmLaunch& L) {
  const double inf = std::numeric_limits<double>::infinity();
  if (L.bm < 1 || L.bm > 8 || L.bn < 1 || L.ks < 1 || L.bn * L.ks != 256) return inf;
  const double units = std::max(1, t.compute_units);
  const double bm = static_cast<double>(L.bm), bn = static_cast<double>(L.bn);
  // A row prologue (KernelWork::prologue_*): the block's A rows in shared memory, f32, a
  // chunk of K at a time.
  const bool prologue = w.prologue;
  const double elem = w.half_operands ? 2 : 4;
  const int64_t step = L.ks * (L.vec > 1 ? static_cast<int64_t>(16 / elem) : 1);
  const double chunk = prologue ? static_cast<double>(skinny_prologue_chunk(
                                      L.bm, step, static_cast<int64_t>(std::min(w.gemm_k, 1e15))))
                                : 0.0;
  const double chunks = prologue ? std::ceil(w.gemm_k / chunk) : 0.0;
  GpuBlock b;
  b.threads = 256;
  b.registers = static_cast<int>(bm + 48);
  b.shared_bytes = static_cast<int>(256 * bm * 4 + bm * chunk * 4 + (w.prologue_stat ? 128 : 0));
  const int resident = resident_blocks(t, b);
  if (resident == 0) return inf;
  const double blocks = std::ceil(w.gemm_m / bm) * std::ceil(w.gemm_n / bn) * std::max(1.0, w.batches);
  const double threads_per_sm = std::min(static_cast<double>(resident), std::ceil(blocks / units)) * 256;
  const double active = std::min(1.0, blocks / units);
  // Bytes a thread has in flight per operand row: one element (scalar loads), one 16-byte
  // load, or two (the 128-bit pair loop of a block of few rows).
  const double pair = L.vec > 1 && L.bm <= kSkinnyPairRows ? 2 : 1;
  const double in_flight = threads_per_sm * 2 * (L.vec > 1 ? pair * 16 : elem);
  const double need = t.mem_bandwidth / units * std::max(t.mem_latency_s, 1e-9);
  const double mem_eff = std::min(1.0, in_flight / need) * active;
  const double bytes = w.bytes_read + w.bytes_written;
  // A (bm x K per block) is re-read by every column block and B by every row block:
  // from cache.
  // With a row prologue every column block computes A's rows again, reading their inputs
  // from cache (and A itself from shared memory, not the cache).
  const double col_blocks = std::ceil(w.gemm_n / bn);
  const double reread =
      (prologue ? w.prologue_bytes * col_blocks
                : elem * w.gemm_k * std::max(1.0, w.batches) * w.gemm_m * col_blocks) +
      elem * w.gemm_k * std::max(1.0, w.batches) * w.gemm_n * std::max(0.0, std::ceil(w.gemm_m / bm) - 1);
  const double memory_s = std::max(bytes / (t.mem_bandwidth * std::max(mem_eff, 1e-3)), reread / t.cache_bandwidth);
  // Rows beyond M are predicated off but still issue: bm FMAs per B element. Each FMA
  // needs its A element and each bm of them a B element: a warp load per warp FMA
  // (scalar) or per 8 (128-bit), and the load units take a quarter of the FMA lanes' rate.
  const double fmas = 2 * bm * std::ceil(w.gemm_m / bm) * w.gemm_n * w.gemm_k * std::max(1.0, w.batches);
  const double per_load = bm / (bm + 1) * (L.vec > 1 ? 16 / elem : 1);
  const double lsu = std::min(1.0, per_load / 4);
  const double prologue_s = (w.prologue_flops + w.prologue_transcendentals * t.transcendental_flops) *
                            col_blocks / (t.peak_flops_f32 * t.loop_efficiency * std::max(active, 1e-3));
  const double compute_s =
      fmas / (t.peak_flops_f32 * t.loop_efficiency * lsu * std::max(active, 1e-3)) + prologue_s;
  // Each thread's K loop waits for its loads once per step; resident warps overlap
  // those waits, blocks beyond one wave repeat them.
  const double steps = std::ceil(w.gemm_k / (static_cast<double>(L.ks) * (L.vec > 1 ? pair * 16 / elem : 1)));
  const double waves = std::ceil(blocks / (units * resident));
  // (A prologue waits for its loads once a block for the statistic and once a chunk for
  // the rows, each behind barriers: from cache.)
  const double latency_s =
      waves * (steps * load_latency(t, bytes) + ((w.prologue_stat ? 1 : 0) + chunks) * 0.4 * t.mem_latency_s);
  // Every FMA reads its A element from L1 (B once per row block): the L1's 128 bytes a
  // cycle per SM (64 per CU on AMD) bound the skinny GEMM well before the FMA lanes when
  // M is not small -- where the tiled GEMMs win.
  const double l1_bytes = elem * w.gemm_n * w.gemm_k * std::max(1.0, w.batches) * (w.gemm_m + std::ceil(w.gemm_m / bm));
  const double l1_s = l1_bytes / (units * (t.warp == 64 ? 64.0 : 128.0) * kClock);
  return std::max({compute_s, memory_s, latency_s, l1_s}) + t.launch_overhead_s;
}

// The vendor BLAS (cuBLASLt): as its kernels tile, 128 x 128 output tiles (64 x 64 when
// fewer would leave SMs idle), one a SM at a time, K split across the SMs that few tiles
// leave idle (a second pass sums the slices); f32 accumulation at the library's
// efficiency of the tensor-core peak (half operands) or the f32 one.
double library_gemm_seconds(const TargetDesc& t, const KernelWork& w, double bw) {
  const double units = std::max(1, t.compute_units);
  const double peak =
      w.half_operands && t.peak_flops_f16 > t.peak_flops_f32 ? t.peak_flops_f16 : t.peak_flops_f32;
  const double batches = std::max(1.0, w.batches), k = std::max(1.0, w.gemm_k);
  auto tiles_of = [&](double side) {
    return std::ceil(w.gemm_m / side) * std::ceil(w.gemm_n / side) * batches;
  };
  double side = 128, tiles = tiles_of(side);
  if (tiles < units) tiles = tiles_of(side = 64);
  const double split =
      tiles < units ? std::clamp(std::floor(units / tiles), 1.0, std::max(1.0, std::floor(k / 256))) : 1;
  const double blocks = tiles * split;
  const double waves = std::ceil(blocks / units);
  const double compute_s =
      waves * 2 * side * side * (k / split) / (peak / units * std::max(t.library_gemm_efficiency, 0.01));
  const double memory_s = (w.bytes_read + w.bytes_written) / (bw * std::clamp(blocks / units, 0.05, 1.0));
  return std::max(compute_s, memory_s) + t.launch_overhead_s * (split > 1 ? 2 : 1);
}

// The kernel itself, without the kernels staged before it.
double main_kernel_seconds(const TargetDesc& t, const KernelWork& w) {
  const double inf = std::numeric_limits<double>::infinity();
  const double units = std::max(1, t.compute_units);
  // (A tanh costs its own: the fast polynomial under fast math, else lm_tanh's.)
  const double tanh_extra = t.approximate_math ? t.fast_tanh_flops - t.transcendental_flops
                            : t.tanh_flops > 0 ? t.tanh_flops - t.transcendental_flops
                                               : 0.0;
  const double flops = w.flops + w.transcendentals * t.transcendental_flops + w.tanhs * tanh_extra;
  // Fast math: the special function units run beside the FMA pipe, a bound of their own:
  // one op per transcendental, a second per tanh, one per reciprocal or square root.
  const double sfu_s =
      t.approximate_math ? (w.transcendentals + w.tanhs + w.special_unary) / t.special_function_rate : 0.0;
  const double bytes = w.bytes_read + w.bytes_written;
  // The traffic's effective bandwidth: leaves from memory when they cannot stay in the L2
  // between calls, the rest from the L2 if it fits (traffic_seconds, shared with the CPU).
  const double traffic_s = traffic_seconds(t, w);
  double bw = traffic_s > 0 ? bytes / traffic_s : t.cache_bandwidth;
  double efficiency = t.loop_efficiency;
  double peak = t.peak_flops_f32;
  double blocks = 1;
  GpuBlock block;

  // A collective: the link's steps and bytes, then the local sum or copy (as on the CPU,
  // cost_model.cpp). Priced as a kernel, an all_reduce over NVLink cost one launch.
  if (w.engine == KernelWork::Engine::Collective)
    return w.link_steps * t.link.latency_s + w.link_bytes / t.link.bandwidth + bytes / bw +
           t.launch_overhead_s;
  if (w.engine == KernelWork::Engine::GeneratedGemm && w.gemm_m > 0) {
    const GpuGemmLaunch L = GpuGemmLaunch::from(w.launch);
    if (L.engine == GpuGemmEngine::Mma) return mma_gemm_seconds(t, w, L);
    if (L.engine == GpuGemmEngine::MmaAsync) return mma_async_gemm_seconds(t, w, L);
    if (L.engine == GpuGemmEngine::Skinny) return skinny_gemm_seconds(t, w, L);
    // Without a launch alternative the renderer uses its default tile, 64 x 64 x 16.
    const std::vector<int64_t> tile = w.launch.size() >= 3 ? std::vector<int64_t>(w.launch.begin(), w.launch.begin() + 3)
                                                           : std::vector<int64_t>{64, 64, 16};
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
    // The FMA tile computes in f32 (half operands converted while staging): no
    // tensor-core peak for it (that is the Mma alternative's).
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
    double compute_s = flops / (peak * std::max(efficiency * utilization, 1e-4));
    // The tile loop stages, synchronizes, computes: each K step waits for its loads unless
    // other resident blocks have work (the floor that makes short K expensive, priced as
    // for the tensor-core tiles).
    const double pure = 2 * bm * bn * static_cast<double>(tile[2]) /
                        (peak / units * std::max(t.gemm_efficiency * smem_bound, 1e-4));
    // Staging a K step: a warp load per 32 elements (per 128 with 128-bit loads), about 4
    // issue slots each with its address and guard, 4 schedulers.
    const double stage = (bm + bn) * static_cast<double>(tile[2]) / 32 / (L.vec > 1 ? 4 : 1) / kClock;
    const double work = pure + stage;
    compute_s *= work / pure;
    double used = 1;
    const double rounds = per_sm_rounds(blocks, units, resident, used);
    const double ksteps = std::ceil(w.gemm_k / static_cast<double>(std::max<int64_t>(1, tile[2])));
    compute_s = std::max(compute_s, rounds * ksteps * round_seconds(work, load_latency(t, bytes), used) * used);
    return std::max(compute_s, memory_s) + t.launch_overhead_s;
  }

  if (w.engine == KernelWork::Engine::LibraryGemm && w.gemm_m > 0) return library_gemm_seconds(t, w, bw);
  if (w.engine == KernelWork::Engine::LibraryGemm) {
    efficiency = t.library_gemm_efficiency;
    if (w.half_operands && t.peak_flops_f16 > t.peak_flops_f32) peak = t.peak_flops_f16;
  } else if (w.engine == KernelWork::Engine::Attention) {
    efficiency = t.attention_efficiency;
  } else if (w.engine == KernelWork::Engine::GeneratedGemm) {
    efficiency = t.gemm_efficiency * w.engine_fraction * 0.5;  // no tile chosen yet
  }

  // gpu_renderer's attention (attention()): a block of 256 threads takes R query rows
  // that read the same K and V (attention_block_rows of the rows that share each K
  // element, when q fits in shared memory) over its keys -- all of them, or, for few rows
  // over many keys, one range of them, the last range block merging the rows
  // (flash-decoding, gpu_launch.hpp). Per chunk of 256 keys: the R dot products of a key,
  // either with lanes across keys (attention_key_vector: K rows read whole, G = dk / E
  // lanes a key, one vector load of E elements a lane, U keys a group a trip, a transposed
  // sum over the G lanes) or a warp per key, U keys a trip, lanes across the depth and one
  // transposed warp sum -- their loads issued first either way; two block reductions for
  // the softmax (the rows' batched); then P V, a thread per (C columns, key group), U_V
  // keys a trip, a key's R weights in one 16-byte shared load where R is a multiple of 4.
  // Priced by
  //  - issue: those loops' warp instructions, counted in their PTX (NVRTC 13, sm_90, the
  //    Llama-3-8B decode step, R = 4: a trip of lanes across keys over 8 keys 306 --
  //    across the depth over 4 keys 220 --, of P V over 4 keys 138 at C = 4 -- over 8 keys
  //    121 at C = 1, four warps a key --, a warp's), one a clock per 32 FP32 lanes -- the
  //    f32 peak's rate, every instruction taken as an FMA pipe's. (PTX overcounts the
  //    halves' conversions: ptxas makes cvt.u16 + cvt.f32.f16, with or without the shift
  //    of an upper half, one instruction -- the same SASS size either way, measured with
  //    ptxas on a kernel of each; left counted, which prices conversion-heavy loops high.)
  //  - memory: K and V at the bandwidth their loads in flight sustain (Little's law, as
  //    the skinny GEMM), each warp having its trip's K rows (lanes across keys) or U x
  //    ceil(dk / W) loads of W elements, then U_V V loads of C elements, in flight;
  //  - the serial chain of a block: its trips' load latencies one after another, blocks
  //    beyond one wave again, and the merging block's reads of the states.
  if (w.engine == KernelWork::Engine::Attention && w.attention_rows > 0) {
    const double rows = w.attention_rows, keys = std::max(1.0, w.attention_keys), W = t.warp;
    const double dk = std::max(1.0, w.attention_depth), dv = std::max(1.0, w.attention_width);
    const bool split = rows <= kAttentionSplitRows && keys > 2.0 * kAttentionSplitKeys;
    const double ranges = split ? static_cast<double>(attention_ranges(static_cast<int64_t>(keys))) : 1.0;
    const bool q_cached = dk <= 1024;
    const int64_t R =
        q_cached ? attention_block_rows(static_cast<int64_t>(std::max(1.0, w.attention_sharing))) : 1;
    const int64_t U = attention_key_unroll(R, t.warp);
    double UV = static_cast<double>(kAttentionValueUnroll);
    const double blocks = std::ceil(rows / static_cast<double>(R)) * ranges;
    const double per_block = std::ceil(keys / ranges), chunk = std::min(256.0, per_block);
    const double chunks = std::ceil(per_block / 256);
    const double steps_k = std::ceil(dk / W);
    const bool q_regs = q_cached && steps_k * static_cast<double>(R) <= 32;
    const double P = static_cast<double>(pow2_at_least(U * R));
    const double shuffles = P == 1 ? std::log2(W) : (P - 1) + std::log2(W / P);
    const double r = static_cast<double>(R), u = static_cast<double>(U);
    // Lanes across keys (attention_key_vector: K rows read whole, E elements a lane, G =
    // dk / E lanes a key, warp / G keys a warp instruction), the decode step's PTX: a trip of
    // 4 keys a group, 8 a warp, 306 instructions -- a key's vector load, its guard and the
    // trip's row address (5 a key), 2.5 a half's conversion (cvt.u16, cvt.f32.f16, a shift
    // for the upper half), R x E FMAs, 4 a value exchanged in the transposed sum over the
    // G lanes (P - 1 of them).
    const int64_t E = q_cached ? attention_key_vector(static_cast<int64_t>(dk),
                                                      static_cast<int64_t>(w.attention_kv_bytes), R, t.warp)
                               : 1;
    const double G = E > 1 ? dk / static_cast<double>(E) : W;
    const double UW = E > 1 ? static_cast<double>(attention_wide_key_unroll(R, static_cast<int64_t>(G))) : u;
    const double PW = static_cast<double>(pow2_at_least(static_cast<int64_t>(UW) * R));
    const double conv = w.attention_kv_bytes == 2 ? 2.5 : 0.0;
    const double dot_trip =
        E > 1 ? 18 + UW * (5 + static_cast<double>(E) * (conv + r)) + 4 * (PW - 1) + 2 * std::log2(G / PW)
              : 18 + u * (8 + 2 * steps_k) + u * r * steps_k * (q_regs ? 1 : 2) + 2 * shuffles + 2 * (P - 1) +
                    12;
    const double dot_keys = E > 1 ? UW * (W / G) : u;
    const double dvb = dv < 256 ? std::min(256.0, std::ceil(dv / W) * W) : 256.0;
    const double groups = 256 / dvb, passes = std::ceil(dv / dvb);
    // P V's columns a thread (8 bytes of V a load when C > 1), as the renderer decides.
    const double part = static_cast<double>(attention_softmax_scratch(R, 256, t.warp));
    const double C = static_cast<double>(attention_value_columns(
        static_cast<int64_t>(dv), static_cast<int64_t>(dvb), static_cast<int64_t>(w.attention_kv_bytes), R,
        256, static_cast<int64_t>((part + (q_cached ? r * dk : 0)) * 4)));
    // A warp's trip of U_V keys: C = 1 121 instructions (R = 4, one column, 8 keys); C = 4
    // 138 at 4 keys (R = 4: 16 FMAs, the 4 weights in one 16-byte shared load -- 150 with a
    // load a weight --, a V load and 4 conversions a key); the renderer takes 4 keys a trip
    // then (kAttentionWideValueUnroll: 8 keys doubled NVRTC's time).
    if (C > 1) UV = static_cast<double>(kAttentionWideValueUnroll);
    const double weight_loads = R % 4 == 0 ? r / 4 : r;
    const double pv_trip = C > 1 ? 10 + UV * (7 + weight_loads + C * (2 + r)) : 24 + UV * (4 + 2 * r);
    const double per_key = dot_trip / dot_keys + std::ceil(std::min(dv, dvb) / C / W) * pv_trip / UV;
    // The key groups' sums meeting: C = 1, a tenth of a row's softmax a warp; C > 1, every
    // warp stores its R x C sums, the owners' warps add the groups' (256 C / DVB of them).
    const double gather = C > 1        ? (256 / W) * (r * C + 4) + (dvb / W) * (2 * (256 * C / dvb) * r + 4)
                          : groups > 1 ? (256 / W) * 10 * r
                                       : 0;
    // A chunk's softmax step, 70 warp instructions a row; 44 where the rows' block
    // reductions are batched (R > 1: the Llama-3-8B decode step's PTX from its first
    // barrier to P V's, 651 a warp before, 411 after).
    const double softmax = (256 / W) * (R > 1 ? 44 : 70) * r + gather;
    const double instructions = blocks * passes * (per_block * per_key + chunks * softmax);
    // (Issuing at 70% of that rate: an assumption -- two blocks of 8 warps an SM, their
    // FMA chains four or more independent rows deep -- no device has measured it.)
    const double issue_s = instructions * 2 * W / (t.peak_flops_f32 * 0.7);
    // Residency: ~40 registers, 12 a row and 7 a column of P V's (90 at R = 4, 118 with C = 4
    // -- NVRTC 13, sm_90), at most 128 (two blocks an SM).
    GpuBlock b;
    b.threads = 256;
    // Lanes across keys keep E of a row's q a lane where lanes across the depth keep
    // ceil(dk / W) (128 registers at the decode step: 8 q values a row where there were 4).
    const double q_extra = E > 1 ? std::max(0.0, r * (static_cast<double>(E) - steps_k)) : 0.0;
    b.registers = static_cast<int>(std::min(128.0, 40 + 12.5 * r + (C > 1 ? 7 * C : 0) + q_extra));
    b.shared_bytes = static_cast<int>((r * 256 * C + part + (q_cached ? r * dk : 0)) * 4);
    const int resident = std::max(1, resident_blocks(t, b));
    const double per_sm = std::min(static_cast<double>(resident), std::ceil(blocks / units));
    const double active = std::min(1.0, blocks / units);
    const double elem = std::max(1.0, w.attention_kv_bytes);
    const double need = t.mem_bandwidth / units * std::max(t.mem_latency_s, 1e-9);
    const double k_flight = per_sm * (256 / W) * (E > 1 ? dot_keys * dk : u * steps_k * W) * elem;
    const double v_flight = per_sm * (256 / W) * UV * W * elem * C;
    auto at = [&](double flight) { return bw * std::max(1e-3, std::min(1.0, flight / need) * active); };
    const double memory_s = bytes / 2 / at(k_flight) + bytes / 2 / at(v_flight);
    // P V's key groups: a column a thread, 256 / DVB; C columns, C times as many.
    const double value_groups = groups * C;
    const double trips = std::ceil(chunk / ((256 / W) * dot_keys)) + std::ceil(chunk / (value_groups * UV));
    const double waves = std::ceil(blocks / (units * resident));
    const double merge_s = split ? 2 * 0.4 * t.mem_latency_s : 0.0;
    const double serial_s =
        waves * chunks * passes * (trips * load_latency(t, bytes) + 200 / kClock) + merge_s;
    return std::max({issue_s, sfu_s, memory_s, serial_s}) + t.launch_overhead_s;
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
    return std::max({compute_s, sfu_s, memory_s, serial_s}) + t.launch_overhead_s;
  }
  const double lanes = units * t.warp * 4;
  const double occupancy = std::clamp(threads / lanes, 1.0 / lanes, 1.0);
  const double compute_s = flops / (peak * std::max(efficiency, 0.01) * occupancy);
  const double memory_s = bytes / (bw * std::min(1.0, std::max(occupancy * 4, 0.05)));
  return std::max({compute_s, sfu_s / occupancy, memory_s}) + t.launch_overhead_s;
}

}  // namespace

double gpu_kernel_seconds(const TargetDesc& t, const KernelWork& w) {
  // Each staged kernel (a materialized statistic, an operand copy, a hoisted table) is a
  // launch of its own; its traffic is the main kernel's bytes_scratch.
  return main_kernel_seconds(t, w) + w.staged_kernels * t.launch_overhead_s;
}

double folded_launch_seconds(const TargetDesc& t, const FoldedLaunches& f) {
  const double clock = t.peak_flops_f32 / (2.0 * t.compute_units * t.simd_lanes_f32);
  double tail = 0.4 * t.mem_latency_s * static_cast<double>(f.tail_hosts);
  for (const FoldedLaunches::Tail& k : f.tails) {
    const double ops =
        static_cast<double>(k.ops) + static_cast<double>(k.transcendentals) * (t.transcendental_flops - 1);
    const double trips = static_cast<double>(k.trips);
    // Straight-line trips are one basic block of independent chains: the scheduler that
    // issues all their loads before the first trip's arithmetic (one round trip) overlaps
    // their arithmetic too, so a trip's chain is the latency; serial trips (a branch
    // between them, a loop, a store that may alias) each wait for their own loads.
    const double chain = 0.4 * t.mem_latency_s + 4.0 * ops / clock;
    const double latency = k.serial ? trips * chain : chain;
    const double issue = static_cast<double>(k.warps) * trips * ops / 4.0 / clock;
    tail += std::max(latency, issue);
  }
  return tail -
         t.launch_overhead_s * static_cast<double>(f.side_kernels + static_cast<int64_t>(f.tails.size()));
}

}  // namespace luminal::detail
