// Kernel IR -> GPU kernel source (CUDA or HIP dialect), one __global__ function per
// kernel, plus the launch shape of each (docs/cuda.md, "The renderer").
//
// Schedules (each kernel's is chosen from its kind, its sizes and the search's launch
// alternative, and named in LaunchShape::schedule):
//  * elementwise / gather: one element per thread, grid-stride over the flattened loop
//    nest, innermost loop fastest across threads (coalesced);
//  * reduction: a row per thread (short rows), per warp (warp-shuffle reduction) or per
//    block (warp shuffles, then the warps' partials through shared memory);
//  * GEMM: a thread block computes a BM x BN tile of C from BK-deep shared-memory tiles
//    of A and B (each thread a (BM/16) x (BN/16) strided micro tile, FMA into f32
//    registers), or, with f16/bf16 operands on sm_80+, warps of mma.sync m16n8k16;
//    the epilogue runs on the registers before the only store of C;
//  * library GEMM (a GemmImpl::Library kernel the BLAS convention expresses,
//    gpu/blas_gemm.hpp): no device code -- the runtime calls the vendor BLAS (cuBLASLt),
//    the emulator a host GEMM with the same arguments.
// Kernel parameters: the buffers the kernel touches (pointers) then every program symbol
// (int64): symbolic dims are arguments, the source never depends on their values.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "backends/gpu/blas_gemm.hpp"
#include "backends/gpu/gpu_arch.hpp"
#include "cost/gpu_cost.hpp"
#include "kernel/kernel_ir.hpp"
#include "luminal/callable.hpp"

namespace luminal::gpu {

struct LaunchShape {
  std::string name;              ///< the __global__ function
  kernel::Index grid[3];         ///< blocks per grid dim, from the program's symbols
  int block[3] = {256, 1, 1};    ///< threads per block
  bool sync = false;             ///< uses barriers or warp operations (the emulator needs fibers)
  std::vector<int> buffers;      ///< kernel parameters: these buffers, then every symbol
  std::string schedule;          ///< "elementwise", "rows/warp", "gemm simt 64x128x32", ...
  int static_shared = 0;         ///< bytes of __shared__ declared
  /// Blocks per SM the schedule is sized for: __launch_bounds__'s second argument, so the
  /// register budget per thread is the schedule's decision (65536 / (threads x this)),
  /// not ptxas's guess -- a kernel that still spills is a cost-model error.
  int min_blocks = 4;
  /// Set for a library GEMM: the BLAS calls that run it (no __global__ function).
  std::shared_ptr<const BlasKernel> blas;
  /// The kernels it runs besides its own (kernel::Kernel::side, ::tail), as the cost
  /// model's FoldedLaunches counts them.
  int side_kernels = 0;
  std::vector<detail::FoldedLaunches::Tail> tails;
};

struct GpuSource {
  std::string prelude;  ///< device prelude + common code (what the device compiler gets first)
  std::string kernels;  ///< the generated kernels: the same text for the device and the emulator
  std::vector<LaunchShape> launches;  ///< one per kernel of the program, in order
  /// The collectives' device kernels follow (gpu/device_collectives.hpp): the emulation
  /// source gives them host entries too.
  bool collective_kernels = false;
  std::string device_source() const { return prelude + kernels; }
};

/// The kernels `src` runs inside other kernels' launches, summed over its launches.
detail::FoldedLaunches folded_launches(const GpuSource& src);

/// True when some launch of `src` is a library call (LaunchShape::blas).
inline bool library_calls(const GpuSource& src) {
  for (const auto& l : src.launches)
    if (l.blas) return true;
  return false;
}

/// The compiler's per-kernel resources in the program's launch order (ptxas and the code
/// object list kernels in their own order); kernels it did not report are left out.
std::vector<KernelResources> in_launch_order(const GpuSource& src, const std::vector<KernelResources>& reported);

/// The launch alternative the search chose for a kernel ({} when none): for a GEMM
/// {tile_m, tile_n, tile_k}.
using ScheduleOf = std::function<std::vector<int64_t>(const kernel::Kernel&)>;

GpuSource render_gpu(const kernel::Program& p, const GpuArch& arch, const ScheduleOf& schedule = {});

/// The emulation translation unit: the emulation header, the common code, the SAME kernel
/// text, and per kernel a host entry `<name>_emu` with the CPU kernel ABI
/// (void(void* const* bufs, const int64_t* syms, const void* rt)) that computes the grid
/// and runs the kernel on the emulator.
std::string emulation_source(const GpuSource& src, const kernel::Program& p, const GpuArch& arch);

/// Renders an index expression the way kernels and launch computations see it (symbols
/// as s<i>, loop variables as v<id>).
std::string render_index(const kernel::Index& i, const kernel::Program& p);

}  // namespace luminal::gpu
