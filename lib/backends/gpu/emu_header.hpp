// The host emulation header: what makes the generated GPU kernel source (exactly the
// text NVRTC / hipRTC compile) a host C++ program. See docs/cuda.md, "The emulator".
//
//  * threadIdx, blockIdx, blockDim, gridDim, __shared__, __global__, __device__,
//    __launch_bounds__, __restrict__, __forceinline__ are defined for the host;
//    `__shared__` is `static thread_local`: every block runs start to finish on one OS
//    thread, so a block's threads share it and concurrently running blocks do not.
//  * Each block's threads run as fibers (our own stack switch on x86-64, ucontext
//    elsewhere) scheduled in sweeps: a fiber runs until it reaches a block barrier or a
//    warp operation; a barrier releases when every live thread of the block (warp) has
//    reached it. A kernel without barriers or warp operations runs its threads as plain
//    calls. A barrier that can never release (divergent control flow) aborts with a
//    message naming the kernel: it is a renderer bug, never a hang.
//  * Blocks run in parallel on worker threads (LUMINAL_EMU_THREADS, default: online CPUs).
//  * The renderer's device helpers (lm_sync, lm_shfl_xor_*, lm_mma_*) have host
//    definitions with the same lane layouts as their device definitions.
#pragma once

#include <string>

#include "backends/gpu/gpu_arch.hpp"

namespace luminal::gpu {

/// The emulation header for `arch`'s dialect and warp width (host C++17, no GPU headers).
std::string emulation_header(const GpuArch& arch);

}  // namespace luminal::gpu

namespace luminal::gpu {
/// Host definitions of the tensor-core helpers; they use the common prelude's f16/bf16
/// conversions, so they follow common_device_code() in the emulation TU.
std::string emulation_mma_helpers();
/// Host definitions of lm_ldmatrix_x4(_trans) and lm_cp_async* (gpu_prelude.hpp).
std::string emulation_async_helpers();
/// Host definitions of lm_mfma_16x16x16_f16/_bf16 (CDNA targets, wave64).
std::string emulation_mfma_helpers();
/// Host definitions of lm_wmma_16x16x16_f16/_bf16 (RDNA3 targets, wave32).
std::string emulation_wmma_helpers();
}  // namespace luminal::gpu
