// Hardware descriptions the cost model reads. One value type for every target kind, so
// the roofline in cost_model.hpp is written once.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace luminal::detail {

/// The link between the ranks of a distributed program (docs/distributed.md): a
/// collective step costs link_steps * latency + link_bytes / bandwidth on top of its local
/// memory traffic.
struct LinkDesc {
  std::string name = "shm";    // "shm", "nvlink", "pcie", "ethernet"
  double bandwidth = 5e9;      // bytes/s one rank sends or receives
  double latency_s = 5e-6;     // one step of a collective (a message round)
};

/// A link by name: "shm" (processes on one host, MPI over shared memory), "nvlink",
/// "pcie", "ethernet". LUMINAL_LINK_GBS / LUMINAL_LINK_LATENCY_US override its figures.
/// Throws CompileError for an unknown name.
LinkDesc describe_link(std::string_view name);

struct TargetDesc {
  std::string name;                 // "cpu:avx512", "cuda:sm_90", "hip:gfx90a"
  int compute_units = 1;            // CPU cores, CUDA SMs, HIP CUs
  int simd_lanes_f32 = 1;           // f32 lanes of one vector instruction (CPU) / warp width (GPU)
  double peak_flops_f32 = 1e9;      // FMA = 2 flops, all units busy
  double peak_flops_f16 = 1e9;      // tensor cores / packed math where present
  /// The matrix engine's bf16 rate as a fraction of its f16 rate: 1 where both run at
  /// one rate; 0.5 on gfx908 (MI100: 92.3 against 184.6 TFLOPS), whose bf16 MFMA
  /// (v_mfma_f32_16x16x8bf16) takes half the k per instruction.
  double bf16_matrix_ratio = 1.0;
  /// The rate generated kernels' matrix instruction reaches, as a fraction of
  /// peak_flops_f16 (the vendor library's instruction): 1 where they are one and the same;
  /// 2/3 for mma.sync on Hopper, whose peak needs wgmma (FlashAttention-3, Shah et al.
  /// 2024, section 2: "mma.sync can only achieve 2/3 of the peak throughput of the H100").
  double matrix_sync_ratio = 1.0;
  double mem_bandwidth = 1e9;       // bytes/s from main memory (DRAM, HBM)
  double cache_bandwidth = 1e9;     // bytes/s from the last-level cache
  double llc_bytes = 0;             // last-level cache (CPU L3, GPU L2)
  double local_bytes = 0;           // per-core L2 (CPU) or shared memory per SM (GPU)
  double launch_overhead_s = 0;     // one kernel launch / parallel region
  double transcendental_flops = 8;  // flop-equivalents of one exp/log/sin/tanh
  /// An exact tanh where it costs more than the others (the GPU prelude's lm_tanh); 0:
  /// transcendental_flops.
  double tanh_flops = 0;
  /// Fast math on a target whose renderer then computes transcendentals with approximate
  /// instructions (CUDA's special function units): their flop-equivalents on the main
  /// pipe, and how many a second those units complete -- a bound of its own, since they
  /// run beside the FMA pipe. 0: the target computes them exactly whatever fast_math says.
  double fast_transcendental_flops = 0;
  /// A tanh under fast math: its plain instructions (it also takes two special-function
  /// ops: KernelWork::tanhs).
  double fast_tanh_flops = 0;
  double special_function_rate = 0;
  /// Set by with_fast_math: transcendentals are priced as the approximate instructions.
  bool approximate_math = false;
  // Fraction of peak FLOP/s each code engine reaches on compute-bound work (measured on
  // the target: bench/cpu/cpu_gemm_bench for the CPU). Which GEMM wins is the ratio of
  // the two GEMM figures, so it is stated per target, never assumed.
  double loop_efficiency = 0.4;          // generated elementwise / reduction loops
  double gemm_efficiency = 0.6;          // generated register-tiled GEMM, large tiles
  double library_gemm_efficiency = 0.8;  // the vendor BLAS (OpenBLAS, cuBLAS, rocBLAS)
  // The streaming attention kernel (both products; a GPU prices its loops instead,
  // gpu_cost.cpp).
  double attention_efficiency = 0.4;
  // The GEMM tile configurations a generated GEMM may use, each an alternative in the
  // e-graph: {rows, cols, k-depth} of the register micro tile (CPU) or of a thread
  // block's output tile (GPU). The first is the default.
  std::vector<std::array<int64_t, 3>> gemm_tiles{{{64, 128, 32}, {32, 64, 16}, {16, 16, 16}}};
  // GPUs: the board the figures are from, the warp (wavefront) width and the per-SM (CU)
  // limits that bound how many blocks of a launch are resident at once (occupancy).
  std::string model;
  int warp = 1;
  int regs_per_unit = 0;         // 32-bit registers per SM (VGPR lanes per CU)
  int max_threads_per_unit = 0;  // resident threads per SM / CU
  int max_blocks_per_unit = 0;   // resident blocks per SM / CU
  /// Registers the device compiler gives one thread at most (0: no limit known). A tile
  /// whose estimate exceeds it would spill, so it does not fit (resident_blocks == 0).
  int max_registers_per_thread = 0;
  /// The matrix instructions generated GEMMs can use (cost/gpu_launch.hpp): 0 none,
  /// 1 mma.sync m16n8k16 f16/bf16 -> f32 (NVIDIA sm_80 and later), 2 MFMA 16x16x16 (CDNA
  /// gfx908, gfx90a and later; f16 and bf16, gfx908 bf16 at bf16_matrix_ratio), 3 WMMA
  /// 16x16x16 f16/bf16 -> f32 (RDNA3, gfx11xx, wave32).
  int matrix_engine = 0;
  /// Round-trip latency of a global load from memory (HBM), seconds: with the bytes an SM
  /// keeps in flight it bounds the bandwidth a streaming kernel reaches (Little's law).
  double mem_latency_s = 0;
  /// Between ranks: shared memory for the CPU (MPI processes on one host), NVLink for
  /// the GPUs; LUMINAL_LINK=name picks another (describe_link).
  LinkDesc link;
};

/// `t` for a plan compiled with fast_math: where the target has approximate
/// transcendentals (special_function_rate > 0) they are priced as those; else `t`.
TargetDesc with_fast_math(TargetDesc t);

/// `t` as one of `ranks` processes on one host sees it (a CPU target over the "shm" link):
/// the ranks share its cores, memory and cache bandwidth, so each has 1/ranks of every
/// throughput and cores/ranks cores (at least one). Without it a rank's kernels were
/// priced as if each owned the whole host while collectives were priced as they are: on
/// tensor_parallel_test's 2-rank decode step every kernel ran about 2x its estimate and
/// the search took replicated work for collectives it saved (docs/distributed.md).
/// Other targets and links (one device per rank, or one host per rank), or ranks <= 1: `t`.
TargetDesc per_rank_share(TargetDesc t, int ranks);

/// The machine this process runs on: cores, vector width (AVX-512, AVX2 or SSE), caches
/// from sysfs. Peak FLOP/s follows from cores x frequency x lanes x 2 FMA units x 2;
/// bandwidth is the figure stated for this machine class (a parallel copy reaches about
/// 20 GB/s), overridable with LUMINAL_CPU_BANDWIDTH_GBS / LUMINAL_CPU_GFLOPS.
TargetDesc describe_host_cpu();

/// A GPU architecture from its published figures: "sm_80" (A100), "sm_90" (H100),
/// "sm_100" (B200), "gfx908" (MI100), "gfx90a" (MI210), "gfx942" (MI300X), "gfx1030"
/// (RX 6900 XT), "gfx1100" (RX 7900 XTX); another architecture of a known family takes
/// the nearest older row (sm_86 -> sm_80). Throws CompileError for anything else.
TargetDesc describe_gpu(std::string_view arch);
/// A board whose figures differ from its architecture's row: "H200" (sm_90, 4.8 TB/s),
/// "MI250" (gfx90a, one GCD), or any row's model name ("A100 SXM4", "MI300X").
TargetDesc describe_gpu_model(std::string_view model);

}  // namespace luminal::detail
