// A library GEMM kernel (kernel::Gemm with GemmImpl::Library) as calls of the vendor
// BLAS (cuBLASLt), in the BLAS convention: column-major matrices, each operand stored
// as it is or transposed, a leading dimension, batches at a fixed stride.
//
// The kernel IR's GEMM is row-major, C (m x n) = A (m x k) * B (k x n), over strided
// views. A row-major C is a column-major C^T, and C^T = B^T * A^T, so the call computes
//   D (n x m, ldd = C's row stride) = op(B^T) * op(A^T),
// each operand stored as it is where its column stride is 1 and transposed where its row
// stride is 1 (no other view is a BLAS matrix: such kernels stay generated).
//
// The kernel's batch loops: the innermost whose operand offsets are affine in its
// variable is the library's strided batch; the others are walked by the host, a call per
// point. The emulator (gpu_renderer.cpp, emulation_source) and the device runtime
// (device_executable.cpp) both take their calls from this description, so the emulated
// library call checks the same translation the device runs.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "kernel/kernel_ir.hpp"
#include "luminal/dtype.hpp"

namespace luminal::gpu {

/// One strided-batched column-major GEMM: for b < batch,
///   D[b] (m x n) = op(A[b]) (m x k) * op(B[b]) (k x n), products summed in f32,
/// X[b] at element offset off_x + b * stride_x of its buffer; op(X) is X stored
/// column-major with leading dimension ldx, or (trans_x) the transpose of one.
struct BlasCall {
  DType ab = DType::f32;  ///< A's and B's type: f16, bf16 or f32
  DType d = DType::f32;   ///< D's type (the f32 sum rounded to it)
  bool trans_a = false, trans_b = false;
  int64_t m = 0, n = 0, k = 0;
  int64_t lda = 1, ldb = 1, ldd = 1;
  int64_t batch = 1;
  int64_t stride_a = 0, stride_b = 0, stride_d = 0;
  int64_t off_a = 0, off_b = 0, off_d = 0;
};

/// A library GEMM kernel's calls, symbolically: Index expressions over the program's
/// symbols and the kernel's batch-loop variables.
struct BlasKernel {
  int a = -1, b = -1, d = -1;  ///< buffers (BLAS roles: A = the IR's B, B = the IR's A)
  DType ab = DType::f32, d_type = DType::f32;
  bool trans_a = false, trans_b = false;
  kernel::Index m, n, k, lda, ldb, ldd;
  kernel::Index off_a, off_b, off_d;  ///< at the batch loops' variables
  std::vector<kernel::Loop> loops;    ///< the kernel's batch loops, outermost first
  int strided = -1;                   ///< the loop the library strides over (-1: none)
};

/// Kernel `k` as BLAS calls, or nullopt (with `why`) when it is not a library GEMM the
/// BLAS convention can express: a segmented B, an epilogue other than the rounding to
/// C's type, operands of different or integer types, a view with no unit stride.
std::optional<BlasKernel> blas_kernel(const kernel::Program& p, const kernel::Kernel& k,
                                      std::string* why = nullptr);

/// The calls of `bk` at the program's symbol values, batch loops walked outermost first
/// (none when a dim is empty). Throws RuntimeError when a leading dimension comes out
/// smaller than its matrix's rows (a view the library would read wrongly).
std::vector<BlasCall> blas_calls(const BlasKernel& bk, const std::map<std::string, int64_t>& syms);

/// The smallest leading dimension a stored rows x cols matrix may declare: rows, at
/// least 1. A matrix of one column may declare any stride; the library is given this.
inline int64_t min_leading(int64_t rows) { return rows > 1 ? rows : 1; }

}  // namespace luminal::gpu
