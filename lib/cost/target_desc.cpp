#include "cost/target_desc.hpp"

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#include "luminal/error.hpp"

namespace luminal::detail {
namespace {

// "48K", "2048K", "32M" from /sys/devices/system/cpu/cpu0/cache/indexN/size.
double read_cache_bytes(int index) {
  std::ifstream f("/sys/devices/system/cpu/cpu0/cache/index" + std::to_string(index) + "/size");
  std::string s;
  if (!(f >> s) || s.empty()) return 0;
  double v = std::atof(s.c_str());
  char unit = s.back();
  if (unit == 'K') v *= 1024;
  if (unit == 'M') v *= 1024 * 1024;
  return v;
}

// Where sysfs has no cache directory (some VMs), the C library's figure (CPUID): the L2
// as reported, the last level capped at 32 MiB -- a VM's CPUID may state the whole
// package's L3 (508 MiB seen for 2 vCPUs of an EPYC), while one core group shares at
// most 32 MiB on the parts the cost model knows (96 MiB with stacked cache: the cap
// stays conservative). LUMINAL_CPU_LLC_MB overrides the last level either way.
double fallback_cache_bytes(int level) {
  const long v = sysconf(level == 2 ? _SC_LEVEL2_CACHE_SIZE : _SC_LEVEL3_CACHE_SIZE);
  if (v <= 0) return 0;
  return level == 2 ? std::min(static_cast<double>(v), 8.0 * (1 << 20)) : std::min(static_cast<double>(v), 32.0 * (1 << 20));
}

bool cpu_has_flag(const std::string& flag) {
  std::ifstream f("/proc/cpuinfo");
  std::string line;
  while (std::getline(f, line)) {
    if (line.rfind("flags", 0) != 0) continue;
    std::istringstream words(line);
    std::string w;
    while (words >> w)
      if (w == flag) return true;
    return false;
  }
  return false;
}

double cpu_ghz() {
  std::ifstream f("/proc/cpuinfo");
  std::string line;
  while (std::getline(f, line))
    if (line.rfind("cpu MHz", 0) == 0) {
      auto colon = line.find(':');
      if (colon != std::string::npos) return std::atof(line.c_str() + colon + 1) / 1000.0;
    }
  return 2.5;
}

double env_or(const char* name, double fallback) {
  const char* v = std::getenv(name);
  return v && *v ? std::atof(v) : fallback;
}

}  // namespace

LinkDesc describe_link(std::string_view name) {
  // Stated figures per rank and direction. shm: Open MPI's shared-memory transport
  // between processes of one host (a memcpy through a shared segment; this machine class
  // copies ~5 GB/s per core); nvlink: NVLink 4 (H100/H200, 450 GB/s per direction, NCCL's
  // small-message latency); pcie: PCIe 4.0 x16; ethernet: 100 Gb/s RoCE between hosts.
  struct Row {
    std::string_view name;
    double gbs, latency_us;
  };
  static constexpr Row kLinks[] = {{"shm", 5, 5}, {"nvlink", 450, 8}, {"pcie", 25, 15}, {"ethernet", 12, 25}};
  for (const Row& r : kLinks) {
    if (r.name != name) continue;
    LinkDesc l;
    l.name = std::string(r.name);
    l.bandwidth = env_or("LUMINAL_LINK_GBS", r.gbs) * 1e9;
    l.latency_s = env_or("LUMINAL_LINK_LATENCY_US", r.latency_us) * 1e-6;
    return l;
  }
  throw CompileError("[cost] unknown link '" + std::string(name) + "': known are shm, nvlink, pcie, ethernet");
}

namespace {
LinkDesc default_link(std::string_view fallback) {
  const char* v = std::getenv("LUMINAL_LINK");
  return describe_link(v && *v ? std::string_view(v) : fallback);
}
}  // namespace

namespace {
// What the hardware says, read once per process (/proc/cpuinfo three times and sysfs on
// every compile were an eighth of a small graph's compile); the environment's overrides
// below are read on every call.
struct HostFacts {
  int cores = 1;
  bool avx512 = false, avx2 = false;
  double ghz = 2.5, l2 = 0, l3 = 0;
};
const HostFacts& host_facts() {
  static const HostFacts f = [] {
    HostFacts h;
    const long cores = sysconf(_SC_NPROCESSORS_ONLN);
    h.cores = cores > 0 ? static_cast<int>(cores) : 1;
    h.avx512 = cpu_has_flag("avx512f");
    h.avx2 = cpu_has_flag("avx2") && cpu_has_flag("fma");
    h.ghz = cpu_ghz();
    h.l2 = read_cache_bytes(2);
    h.l3 = read_cache_bytes(3);
    if (h.l2 == 0 && h.l3 == 0) {
      h.l2 = fallback_cache_bytes(2);
      h.l3 = fallback_cache_bytes(3);
    }
    return h;
  }();
  return f;
}
}  // namespace

TargetDesc describe_host_cpu() {
  TargetDesc d;
  const HostFacts& hw = host_facts();
  d.compute_units = hw.cores;
  const bool avx512 = hw.avx512;
  const bool avx2 = hw.avx2;
  d.simd_lanes_f32 = avx512 ? 16 : avx2 ? 8 : 4;
  d.name = avx512 ? "cpu:avx512" : avx2 ? "cpu:avx2" : "cpu:sse";
  double fma_units = avx2 || avx512 ? 2 : 1;
  double peak = d.compute_units * hw.ghz * 1e9 * d.simd_lanes_f32 * fma_units * 2;
  d.peak_flops_f32 = env_or("LUMINAL_CPU_GFLOPS", peak / 1e9) * 1e9;
  d.peak_flops_f16 = d.peak_flops_f32;  // f16/bf16 compute in f32 on the CPU
  d.mem_bandwidth = env_or("LUMINAL_CPU_BANDWIDTH_GBS", 20.0) * 1e9;
  d.cache_bandwidth = d.mem_bandwidth * 4;
  d.local_bytes = hw.l2;
  d.llc_bytes = env_or("LUMINAL_CPU_LLC_MB", hw.l3 / (1 << 20)) * (1 << 20);
  if (d.llc_bytes == 0) d.llc_bytes = d.local_bytes;
  d.launch_overhead_s = 2e-6;   // an OpenMP parallel region: fork, barrier
  d.transcendental_flops = 12;  // our vectorized polynomial approximations
  // Register micro tiles that fit the vector register file (checked again by the GEMM
  // generator): the squarer default, a wide one and a tall one, so a product with few
  // rows or few columns wastes fewer lanes.
  if (avx512)
    d.gemm_tiles = {{{8, 32, 256}, {4, 64, 256}, {16, 16, 256}}};
  else if (avx2)
    d.gemm_tiles = {{{6, 16, 256}, {4, 24, 256}, {12, 8, 256}}};
  else
    d.gemm_tiles = {{{4, 16, 256}, {2, 32, 256}, {8, 8, 256}}};
  // cpu_gemm_bench, 2 threads, f32 512..2048 (2026-11-29): the generated AVX-512 GEMM
  // 424-450 GFLOP/s, OpenBLAS cblas_sgemm 249-254 GFLOP/s: ours is 1.7x faster, and the
  // model says so. (The nominal peak from cpuinfo's base clock understates turbo, so the
  // two are stated relative to each other, the generated one at 0.85.) Another machine
  // recalibrates with LUMINAL_CPU_GEMM_EFFICIENCY / LUMINAL_CPU_BLAS_EFFICIENCY.
  d.gemm_efficiency = env_or("LUMINAL_CPU_GEMM_EFFICIENCY", 0.85);
  d.library_gemm_efficiency = env_or("LUMINAL_CPU_BLAS_EFFICIENCY", 0.5);
  // The streaming attention kernel, stated relative to the generated GEMM's 0.85 as the
  // two GEMM figures are: bench/cpu/cpu_attention_bench (32 heads, 8 KV heads, head dim
  // 128, causal; one thread, CPU time, 2026-12-01) ran it in 2.05 ms against 2.45 ms for
  // the unfused plan (QK^T GEMM, softmax, PV GEMM) at S = 128 and 25.7 vs 42.4 ms at
  // S = 512. At 0.5 the model prices the two plans 0.83 : 1 at S = 128 (measured 0.84)
  // and 0.84 : 1 at S = 512 (measured 0.61: the model stays conservative there).
  d.attention_efficiency = env_or("LUMINAL_CPU_ATTENTION_EFFICIENCY", 0.5);
  d.link = default_link("shm");
  return d;
}

namespace {

// Published figures of the GPU architectures the cost model knows (vendor data sheets,
// dense tensor/matrix throughput, boost clocks). lanes: 4 warps (wavefronts) in flight
// per SM (CU) to hide latency. Per-SM limits feed the occupancy estimate of a launch.
struct GpuFigures {
  std::string_view arch, name, model;
  int units, warp;
  double f32, f16, mem_bw, cache_bw, llc_mib, local_kib, launch_s;
  int regs_per_unit, max_threads_per_unit, max_blocks_per_unit;
};
constexpr GpuFigures kGpus[] = {
    // A100 SXM4 80GB: 108 SMs, 19.5 TFLOP/s FP32, 312 FP16 tensor, 2.04 TB/s HBM2e, 40 MB L2,
    // 164 KB shared per SM, 64K registers, 2048 threads, 32 blocks per SM.
    {"sm_80", "cuda:sm_80", "A100 SXM4", 108, 32, 19.5e12, 312e12, 2.04e12, 5.0e12, 40, 164, 4e-6, 65536, 2048, 32},
    // H100 SXM5: 132 SMs, 67 TFLOP/s FP32, 989 FP16 tensor, 3.35 TB/s HBM3, 50 MB L2,
    // 228 KB shared per SM.
    {"sm_90", "cuda:sm_90", "H100 SXM5", 132, 32, 67e12, 989e12, 3.35e12, 10e12, 50, 228, 3e-6, 65536, 2048, 32},
    // B200: 148 SMs, 80 TFLOP/s FP32, 2250 FP16 tensor, 8 TB/s HBM3e, 126 MB L2.
    {"sm_100", "cuda:sm_100", "B200", 148, 32, 80e12, 2250e12, 8.0e12, 20e12, 126, 228, 3e-6, 65536, 2048, 32},
    // MI100: 120 CUs, 23.1 TFLOP/s FP32, 184.6 FP16 matrix, 1.23 TB/s HBM2, 8 MB L2, 64 KB LDS.
    {"gfx908", "hip:gfx908", "MI100", 120, 64, 23.1e12, 184.6e12, 1.23e12, 3.0e12, 8, 64, 5e-6, 131072, 2560, 32},
    // MI210 (one CDNA2 die, as each GCD of an MI250): 104 CUs, 45.3 TFLOP/s FP32 (packed),
    // 181 FP16 matrix, 1.6 TB/s HBM2e, 8 MB L2, 64 KB LDS.
    {"gfx90a", "hip:gfx90a", "MI210", 104, 64, 45.3e12, 181e12, 1.6e12, 4.0e12, 8, 64, 5e-6, 131072, 2560, 32},
    // MI300X: 304 CUs, 163.4 TFLOP/s FP32 (matrix), 1307 FP16 matrix, 5.3 TB/s HBM3, 256 MB
    // Infinity Cache, 64 KB LDS.
    {"gfx942", "hip:gfx942", "MI300X", 304, 64, 163.4e12, 1307e12, 5.3e12, 12e12, 256, 64, 5e-6, 131072, 2560, 32},
    // RX 6900 XT / W6800 (RDNA2, wave32): 80 CUs, 23 TFLOP/s FP32, 46 FP16 (packed), 512 GB/s,
    // 128 MB Infinity Cache, 64 KB LDS per CU.
    {"gfx1030", "hip:gfx1030", "RX 6900 XT", 80, 32, 23e12, 46e12, 0.512e12, 1.9e12, 128, 64, 5e-6, 65536, 2048, 32},
    // RX 7900 XTX (RDNA3, wave32): 96 CUs, 61 TFLOP/s FP32 (dual issue), 123 FP16 WMMA (bf16
    // the same), 960 GB/s, 96 MB Infinity Cache; Navi 31's SIMDs hold 1536 VGPRs of 32 lanes
    // (RDNA2: 1024), two SIMDs a CU.
    {"gfx1100", "hip:gfx1100", "RX 7900 XTX", 96, 32, 61e12, 123e12, 0.96e12, 3.5e12, 96, 64, 5e-6, 98304, 2048, 32},
};

// The figures `arch` is costed with: its own row, else the newest row of its family not
// newer than it (sm_86 -> sm_80, sm_120 -> sm_100), the nearest CDNA row for other gfx9
// parts and the RDNA rows for gfx10/11/12. CUDA architectures before sm_80 have none.
const GpuFigures* figures_for(std::string_view arch) {
  for (const GpuFigures& f : kGpus)
    if (f.arch == arch) return &f;
  if (arch.rfind("sm_", 0) == 0) {
    const int v = std::atoi(std::string(arch.substr(3)).c_str());
    const GpuFigures* best = nullptr;
    for (const GpuFigures& f : kGpus)
      if (f.arch.rfind("sm_", 0) == 0) {
        const int fv = std::atoi(std::string(f.arch.substr(3)).c_str());
        if (fv <= v && (!best || fv > std::atoi(std::string(best->arch.substr(3)).c_str()))) best = &f;
      }
    return best;  // older than every row (sm_70, sm_75): not described
  }
  if (arch.rfind("gfx9", 0) == 0) return arch >= std::string_view("gfx940") ? &kGpus[5] : &kGpus[4];
  if (arch.rfind("gfx10", 0) == 0) return &kGpus[6];
  if (arch.rfind("gfx11", 0) == 0 || arch.rfind("gfx12", 0) == 0) return &kGpus[7];
  return nullptr;
}

}  // namespace

TargetDesc describe_gpu(std::string_view arch) {
  const GpuFigures* f = figures_for(arch);
  if (!f) {
    std::string known;
    for (const GpuFigures& g : kGpus) known += (known.empty() ? "" : ", ") + std::string(g.arch);
    throw CompileError("[cost] unknown GPU architecture '" + std::string(arch) + "': known are " + known);
  }
  TargetDesc d;
  d.name = (arch.rfind("sm_", 0) == 0 ? "cuda:" : "hip:") + std::string(arch);
  d.model = std::string(f->model);
  d.compute_units = f->units;
  d.simd_lanes_f32 = f->warp * 4;
  d.warp = f->warp;
  d.peak_flops_f32 = f->f32;
  d.peak_flops_f16 = f->f16;
  d.mem_bandwidth = f->mem_bw;
  d.cache_bandwidth = f->cache_bw;
  d.llc_bytes = f->llc_mib * 1024 * 1024;
  d.local_bytes = f->local_kib * 1024;
  d.launch_overhead_s = f->launch_s;
  // The C prelude's polynomials, not the special function units (they keep device and
  // emulator bit-identical): lm_exp 23, lm_sin 28, lm_tanh 37, lm_log 35 PTX instructions
  // (NVRTC, sm_90), against one counted flop per plain op: the others at 27, tanh at its
  // own 37 (KernelWork::tanhs).
  d.transcendental_flops = 27;
  d.tanh_flops = 37;
  // Under fast math the CUDA renderer uses the special function units (gpu_prelude.cpp):
  // exp2/log2 one MUFU instruction, exp two, sin five with its range reduction; the units
  // complete 16 a clock per SM on sm_80 to sm_100 (CUDA C++ Programming Guide, throughput
  // of native arithmetic instructions), the clock being the f32 peak over 2 x the FP32
  // lanes per SM (64 on sm_80, 128 from sm_90): A100 1.41 GHz, H100 1.98 GHz.
  if (f->arch.rfind("sm_", 0) == 0) {
    const double fp32_lanes = f->arch == "sm_80" ? 64 : 128;
    d.fast_transcendental_flops = 2;
    d.fast_tanh_flops = 16;  // lm_fast_tanh: the polynomial, the sign, the select (gpu_prelude.cpp)
    d.special_function_rate = f->units * 16.0 * (f->f32 / (2.0 * f->units * fp32_lanes));
  }
  d.link = default_link(arch == "gfx90a" || arch.rfind("gfx", 0) == 0 ? "pcie" : "nvlink");
  d.regs_per_unit = f->regs_per_unit;
  d.max_threads_per_unit = f->max_threads_per_unit;
  d.max_blocks_per_unit = f->max_blocks_per_unit;
  // Every CUDA row is sm_80 or later: mma.sync m16n8k16 with f16/bf16 operands.
  if (arch.rfind("sm_", 0) == 0) d.matrix_engine = 1;
  // Hopper's and Blackwell's peaks are wgmma's and tcgen05's; mma.sync (what generated
  // kernels issue) reaches about 2/3 of Hopper's (target_desc.hpp). No figure is published
  // for Blackwell: taken as Hopper's.
  if (arch.rfind("sm_", 0) == 0 && std::atoi(std::string(arch.substr(3)).c_str()) >= 90)
    d.matrix_sync_ratio = 2.0 / 3.0;
  // CDNA's MFMA (v_mfma_f32_16x16x16f16): gfx908, gfx90a, gfx94x.
  if (arch == "gfx908" || arch == "gfx90a" || arch.rfind("gfx94", 0) == 0) d.matrix_engine = 2;
  if (arch == "gfx908") d.bf16_matrix_ratio = 0.5;
  // RDNA3's WMMA (v_wmma_f32_16x16x16_f16 / _bf16, wave32): gfx11xx.
  if (arch.rfind("gfx11", 0) == 0) d.matrix_engine = 3;
  // Registers a thread may hold: 255 on NVIDIA, 256 VGPRs on AMD (CDNA's accumulation
  // registers aside) -- except gfx11, where LLVM 15's AMDGPU backend (Debian's clang 15;
  // ROCm 5.4's hipRTC is of that generation) allocates at most 128 VGPRs to a wave32
  // kernel whatever its launch bounds: a 128 x 128 WMMA tile spilled 456 bytes a lane
  // (tests/gpu "[clang][wmma]").
  d.max_registers_per_thread = arch.rfind("sm_", 0) == 0 ? 255 : arch.rfind("gfx11", 0) == 0 ? 128 : 256;
  // ~600 cycles to HBM at ~1.7 GHz on both vendors' data-centre parts (microbenchmark
  // papers: A100 ~ 470 ns, H100 ~ 480 ns to DRAM; MI200 in the same range).
  d.mem_latency_s = 0.5e-6;
  // Thread-block tiles come from the schedule_gpu rules (the same candidates for every
  // GPU; the GPU cost model ranks them), not from the description.
  d.gemm_tiles.clear();
  return d;
}

TargetDesc with_fast_math(TargetDesc t) {
  if (t.special_function_rate > 0) {
    t.transcendental_flops = t.fast_transcendental_flops;
    t.approximate_math = true;
  }
  return t;
}

TargetDesc per_rank_share(TargetDesc t, int ranks) {
  if (ranks <= 1 || t.warp > 1 || t.link.name != "shm") return t;
  const double share = 1.0 / ranks;
  t.compute_units = std::max(1, t.compute_units / ranks);
  t.peak_flops_f32 *= share;
  t.peak_flops_f16 *= share;
  t.mem_bandwidth *= share;
  t.cache_bandwidth *= share;
  return t;
}

TargetDesc describe_gpu_model(std::string_view model) {
  // Boards that share an architecture with the table's row but differ in memory: the
  // H200 is an H100 (sm_90) with 141 GB of HBM3e at 4.8 TB/s.
  if (model == "H200" || model == "h200") {
    TargetDesc d = describe_gpu("sm_90");
    d.model = "H200 SXM";
    d.mem_bandwidth = 4.8e12;
    return d;
  }
  if (model == "MI250" || model == "mi250") {
    TargetDesc d = describe_gpu("gfx90a");  // per GCD: 110 CUs, 191.5 TFLOP/s FP16, 1.6 TB/s
    d.model = "MI250 (one GCD)";
    d.compute_units = 110;
    d.peak_flops_f16 = 191.5e12;
    d.peak_flops_f32 = 47.9e12;
    return d;
  }
  for (const GpuFigures& f : kGpus)
    if (f.model == model) return describe_gpu(f.arch);
  throw CompileError("[cost] unknown GPU model '" + std::string(model) + "'");
}

}  // namespace luminal::detail
