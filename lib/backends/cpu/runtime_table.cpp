// The host services table handed to generated kernels: the BLAS SGEMM of GEMM kernels of
// the Library kind (OpenBLAS when Luminal is built with BLAS), and the call's threads
// (runtime/thread_pool.hpp) and scratch (kernel_call.hpp).
#include "backends/cpu/kernel_call.hpp"

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

int call_threads(void* cx) {
  auto* c = static_cast<KernelCall*>(cx);
  return c && c->team ? c->team->threads() : 1;
}

void call_parallel_for(void* cx, int64_t n, int64_t chunk, LmTaskFn fn, const void* env, int64_t env_bytes,
                       int nowait) {
  auto* c = static_cast<KernelCall*>(cx);
  if (!c || !c->team) {
    if (n > 0) fn(const_cast<void*>(env), 0, n, 0);
    return;
  }
  c->team->parallel_for(n, chunk, fn, env, static_cast<size_t>(env_bytes), nowait != 0);
}

void* call_scratch(void* cx, int tid, int64_t bytes) {
  auto* c = static_cast<KernelCall*>(cx);
  if (!c || !c->scratch || tid < 0 || tid >= c->scratch_threads || bytes < 0 ||
      static_cast<size_t>(bytes) > c->scratch_bytes)
    return nullptr;
  return c->scratch + static_cast<size_t>(tid) * c->scratch_bytes;
}

void call_barrier(void* cx) {
  auto* c = static_cast<KernelCall*>(cx);
  if (c && c->team) c->team->barrier();
}
}  // namespace

const LmRuntime* runtime_table() {
#ifdef LUMINAL_HAS_BLAS
  static const LmRuntime rt{&sgemm_bridge, &call_threads, &call_parallel_for, &call_scratch, &call_barrier};
#else
  static const LmRuntime rt{nullptr, &call_threads, &call_parallel_for, &call_scratch, &call_barrier};
#endif
  return &rt;
}

void run_generated(KernelFn fn, void* const* buffers, const int64_t* symbols, int threads) {
  const auto& pool = detail::WorkerPool::shared();
  detail::CallTeam team(pool.get(), threads > 0 ? threads : pool->capacity() + 1);
  KernelCall call;
  call.team = &team;
  fn(buffers, symbols, runtime_table(), &call);
  team.finish();
}

}  // namespace luminal::cpu
