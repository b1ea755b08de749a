// The hand-declared cuBLASLt ABI (lib/backends/cuda/cublaslt.hpp) against the CUDA
// toolkit's cublasLt.h, at compile time, where the toolkit is installed. A file of its
// own: CUDA's headers and HIP's (other gpu_tests files) cannot share a translation unit,
// so it stays out of unity builds and alone gets the toolkit's include folder.
#include <catch2/catch.hpp>

#include <cstddef>

#include "backends/cuda/cublaslt.hpp"

#ifdef LUMINAL_TEST_CUBLASLT_HEADER
#include <cublasLt.h>

namespace lt = luminal::cuda::lt;

// The hand-declared ABI against the toolkit's header.
static_assert(lt::kCompute32F == CUBLAS_COMPUTE_32F);
static_assert(lt::kR32F == CUDA_R_32F && lt::kR16F == CUDA_R_16F && lt::kR16BF == CUDA_R_16BF);
static_assert(lt::kOpN == CUBLAS_OP_N && lt::kOpT == CUBLAS_OP_T);
static_assert(lt::kDescTransA == CUBLASLT_MATMUL_DESC_TRANSA &&
              lt::kDescTransB == CUBLASLT_MATMUL_DESC_TRANSB);
static_assert(lt::kLayoutBatchCount == CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT &&
              lt::kLayoutBatchStride == CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET);
static_assert(lt::kPrefMaxWorkspace == CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES &&
              lt::kPrefAlignA == CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES &&
              lt::kPrefAlignB == CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES &&
              lt::kPrefAlignC == CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES &&
              lt::kPrefAlignD == CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES);
static_assert(sizeof(lt::HeuristicResult) == sizeof(cublasLtMatmulHeuristicResult_t));
static_assert(offsetof(lt::HeuristicResult, workspace) ==
              offsetof(cublasLtMatmulHeuristicResult_t, workspaceSize));

TEST_CASE("cuBLASLt: the hand-declared ABI matches cublasLt.h", "[gpu][blas][cublaslt]") { SUCCEED(); }
#else
TEST_CASE("cuBLASLt: the hand-declared ABI matches cublasLt.h", "[gpu][blas][cublaslt]") {
  WARN("cublasLt.h not found at configure time: the ABI is checked only against the loaded library");
}
#endif
