// The host services table handed to generated kernels: today the BLAS SGEMM used by
// GEMM kernels of the Library kind (OpenBLAS when Luminal is built with BLAS).
#include "backends/cpu/c_renderer.hpp"

#ifdef LUMINAL_HAS_BLAS
#include <cblas.h>
#endif

namespace luminal::cpu {

namespace {
#ifdef LUMINAL_HAS_BLAS
void sgemm_bridge(int order, int ta, int tb, int m, int n, int k, float alpha, const float* a, int lda,
                  const float* b, int ldb, float beta, float* c, int ldc) {
  cblas_sgemm(static_cast<CBLAS_ORDER>(order), static_cast<CBLAS_TRANSPOSE>(ta),
              static_cast<CBLAS_TRANSPOSE>(tb), m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}
#endif
}  // namespace

const LmRuntime* runtime_table() {
#ifdef LUMINAL_HAS_BLAS
  static const LmRuntime rt{&sgemm_bridge};
#else
  static const LmRuntime rt{nullptr};
#endif
  return &rt;
}

}  // namespace luminal::cpu
