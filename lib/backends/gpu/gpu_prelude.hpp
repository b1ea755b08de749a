// The code every generated GPU source starts with, in two parts:
//  * the dialect part (device_prelude): integer types, qualifiers, and the device
//    definitions of our helpers -- lm_sync (block barrier), lm_shfl_xor_f32/_i32 (warp
//    butterfly exchange, full mask), lm_mma_m16n8k16_f16/_bf16 (tensor-core product),
//    lm_atomic_add_f32, lm_atomic_add_i32 (returns the old value) and lm_threadfence
//    (device-wide store ordering). The emulation header (emu_header.hpp) defines the same helpers for
//    the host. Generated kernels use warp, tensor-core and barrier operations ONLY through
//    these helpers, and only in uniform control flow (every thread of the block, or of
//    the warp, reaches the same helper call), so the emulator can run them exactly;
//  * the common part (common_device_code): the CPU backend's C prelude math (our own
//    branch-free polynomials, so host and device compute the same bits; with --fmad=false
//    neither side contracts a*b+c), integer helpers whose i32 arithmetic wraps like
//    PyTorch's (no signed-overflow UB), and warp/block reductions built on the helpers.
//    One exception: the f16 conversions (and bf16 rounding on CUDA) are the hardware's
//    (the device part defines them), the same bits but for NaN payloads.
// Nothing is #included: any NVRTC from 11.8 on, and hipRTC, compile it as it is.
//
// Lane layouts (the one documented layout of each helper):
//  * lm_shfl_xor_*(v, m): lane l receives v of lane (l ^ m) of its own warp; warps are
//    LM_WARP consecutive linear thread ids.
//  * lm_mma_m16n8k16_*(d, a, b, c): D(16x8) = A(16x16) B(16x8) + C in f32, per warp of 32;
//    g = lane / 4, t = lane % 4; register halves: low 16 bits = the lower index.
//      a[0] = A[g][2t..2t+1]     a[1] = A[g+8][2t..2t+1]
//      a[2] = A[g][2t+8..2t+9]   a[3] = A[g+8][2t+8..2t+9]
//      b[0] = B[2t..2t+1][g]     b[1] = B[2t+8..2t+9][g]
//      c[i], d[i] = C/D[g + 8*(i/2)][2t + i%2]
//    (PTX ISA, "mma.m16n8k16" fragment layouts for .f16/.bf16 A, B and .f32 C, D.)
//  * lm_mfma_16x16x16_*(d, a, b, c) (HIP, CDNA, one wavefront of 64): D(16x16) =
//    A(16x16) B(16x16) + C in f32; r = lane % 16, g = lane / 16, item q = 0..3 (a[0] holds
//    items 0-1, a[1] items 2-3, low half first):
//      A[r][4g + q]   B[4g + q][r]   c[q], d[q] = C/D[4g + q][r]
//    (AMD CDNA ISA / matrix instruction calculator, v_mfma_f32_16x16x16f16 and
//    v_mfma_f32_16x16x16bf16_1k; on gfx908 bf16 is two v_mfma_f32_16x16x8bf16, each
//    taking one word of every lane: gpu_prelude.cpp.)
//  * lm_wmma_16x16x16_*(d, a, b, c) (HIP, RDNA3 gfx11, one wavefront of 32): D(16x16) =
//    A(16x16) B(16x16) + C in f32; r = lane % 16, h = lane / 16, w = 0..7, v = 0..7:
//      a[w] = A[r][2w..2w+1]   b[w] = B[2w..2w+1][r]   c[v], d[v] = C/D[2v + h][r]
//    so a lane holds a whole row of A and column of B; the instruction requires lanes r
//    and r + 16 to hold the same A and B words (the emulator aborts when they differ).
//    (RDNA3 ISA, "Wave Matrix Multiply Accumulate", v_wmma_f32_16x16x16_f16/_bf16, wave32.)
//  * lm_ld128(p): the 16 bytes at p as four 32-bit words (x = lowest address; a word's low
//    half is the lower-addressed f16/bf16); p must be 16-byte aligned (lm_aligned16(p)):
//    the device faults and the emulator aborts otherwise, so callers guard it.
//  * lm_ldmatrix_x4(r, row) (CUDA sm_80+, per warp of 32, shared memory): four 8 x 8
//    matrices of 16-bit elements; lane 8q + i gives the address of row i of matrix q (16
//    bytes, 16-byte aligned); lane l receives in r[q] the word holding elements
//    2(l%4) and 2(l%4) + 1 of row l/4 of matrix q (low half the lower column).
//    lm_ldmatrix_x4_trans: the same rows, each matrix transposed: r[q] holds row 2(l%4)
//    (low half) and row 2(l%4) + 1 (high half), both at column l/4.
//    (PTX ISA, "ldmatrix", .m8n8.x4.b16 with and without .trans.)
//  * lm_cp_async16(dst, src, n) (CUDA sm_80+): copies the n <= 16 bytes at global src to
//    shared dst (both 16-byte aligned) and zero-fills dst's other 16 - n bytes, some time
//    before the thread's lm_cp_async_wait<N>() returns with its copy's group complete;
//    lm_cp_async_commit() closes the thread's current group; lm_cp_async_wait<N>() waits
//    until at most N of its newest groups are pending. Other threads see the bytes only
//    after that wait and a barrier; the emulator writes them at the wait, so a kernel that
//    reads a tile earlier reads stale data there as it might on the device.
//    (PTX ISA, "cp.async", .cg with cp-size 16 and src-size; "cp.async.wait_group".)
#pragma once

#include <string>

#include "backends/gpu/gpu_arch.hpp"

namespace luminal::gpu {

std::string device_prelude(const GpuArch& arch);
/// Which f16/bf16 conversions the device part defines as the hardware's instructions
/// (device_prelude: CUDA both, HIP f16 only); the common part then leaves out the C
/// prelude's. The emulator keeps the C prelude's (Software).
enum class HalfConversions { Software, NativeF16, NativeF16Bf16 };
HalfConversions native_half_conversions(const GpuArch& arch);
std::string common_device_code(HalfConversions halves = HalfConversions::Software);
/// The emulator's lm_fast_* (fast math, after the common code): the device part's
/// formulas with exact functions and subnormals flushed.
std::string emulated_fast_math();

}  // namespace luminal::gpu
