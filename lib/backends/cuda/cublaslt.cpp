#include "backends/cuda/cublaslt.hpp"

#include <dlfcn.h>

#include "backends/gpu/rtc.hpp"
#include "dist/dl.hpp"
#include "luminal/error.hpp"

namespace luminal::cuda {

namespace {

int data_type(DType t) {
  switch (t) {
    case DType::f16:
      return lt::kR16F;
    case DType::bf16:
      return lt::kR16BF;
    case DType::f32:
      return lt::kR32F;
    default:
      throw InternalError("[cublasLt] no BLAS type for " + std::string(dtype_name(t)));
  }
}

// The largest power of two, at most 256, dividing every address a call's batches start at.
std::int64_t alignment(std::uint64_t addr, std::int64_t stride_bytes, std::int64_t batch) {
  std::uint64_t bits = addr | (batch > 1 ? static_cast<std::uint64_t>(stride_bytes) : 0) | 256;
  return static_cast<std::int64_t>(bits & (~bits + 1));
}

}  // namespace

const CublasLt* CublasLt::get(std::string* why) {
  static std::once_flag once;
  static CublasLt* instance = nullptr;
  static std::string failure;
  std::call_once(once, [] {
    void* h = nullptr;
    try {
      h = dist::open_library({"libcublasLt.so.13", "libcublasLt.so.12", "libcublasLt.so.11"}, "cublasLt",
                             RTLD_NOW | RTLD_LOCAL);
    } catch (const RuntimeError& e) {  // (names every library tried, with dlerror's reason)
      failure = e.what();
      return;
    }
    auto* l = new CublasLt();  // never destroyed: the handles live as long as the process
    using gpu::bind_symbol;
    const bool ok = bind_symbol(h, "cublasLtCreate", l->create_) &&
                    bind_symbol(h, "cublasLtGetVersion", l->get_version_) &&
                    bind_symbol(h, "cublasLtGetStatusString", l->status_string_) &&
                    bind_symbol(h, "cublasLtMatmulDescCreate", l->desc_create_) &&
                    bind_symbol(h, "cublasLtMatmulDescDestroy", l->desc_destroy_) &&
                    bind_symbol(h, "cublasLtMatmulDescSetAttribute", l->desc_set_) &&
                    bind_symbol(h, "cublasLtMatrixLayoutCreate", l->layout_create_) &&
                    bind_symbol(h, "cublasLtMatrixLayoutDestroy", l->layout_destroy_) &&
                    bind_symbol(h, "cublasLtMatrixLayoutSetAttribute", l->layout_set_) &&
                    bind_symbol(h, "cublasLtMatmulPreferenceCreate", l->pref_create_) &&
                    bind_symbol(h, "cublasLtMatmulPreferenceDestroy", l->pref_destroy_) &&
                    bind_symbol(h, "cublasLtMatmulPreferenceSetAttribute", l->pref_set_) &&
                    bind_symbol(h, "cublasLtMatmulAlgoGetHeuristic", l->heuristic_) &&
                    bind_symbol(h, "cublasLtMatmul", l->matmul_);
    if (!ok) {
      failure = "the loaded cuBLASLt lacks entry points the runtime needs (older than CUDA 11.4?)";
      delete l;
      return;
    }
    const std::size_t v = l->get_version_();  // major * 10000 + minor * 100 + patch
    l->version_ = "cuBLASLt " + std::to_string(v / 10000) + "." + std::to_string(v / 100 % 100) + "." +
                  std::to_string(v % 100);
    instance = l;
  });
  if (!instance && why) *why = failure;
  return instance;
}

void CublasLt::check(int status, const char* what) const {
  if (status == 0) return;
  const char* s = status_string_ ? status_string_(status) : nullptr;
  throw RuntimeError(std::string("[cublasLt] ") + what + ": " + (s ? s : "status " + std::to_string(status)));
}

CublasLt::Descriptors::~Descriptors() {
  if (!lib) return;
  for (void* l : {a, b, d})
    if (l) lib->layout_destroy_(l);
  if (op) lib->desc_destroy_(op);
}

std::unique_ptr<CublasLt::Descriptors> CublasLt::describe(const gpu::BlasCall& c) const {
  auto out = std::make_unique<Descriptors>();
  out->lib = this;
  check(desc_create_(&out->op, lt::kCompute32F, lt::kR32F), "creating the matmul descriptor");
  const int ta = c.trans_a ? lt::kOpT : lt::kOpN, tb = c.trans_b ? lt::kOpT : lt::kOpN;
  check(desc_set_(out->op, lt::kDescTransA, &ta, sizeof ta), "setting transa");
  check(desc_set_(out->op, lt::kDescTransB, &tb, sizeof tb), "setting transb");
  // Layouts describe the operands as stored: rows x cols, column-major, leading dim ld.
  auto layout = [&](void** l, DType t, std::int64_t rows, std::int64_t cols, std::int64_t ld,
                    std::int64_t stride, const char* what) {
    check(layout_create_(l, data_type(t), static_cast<std::uint64_t>(rows), static_cast<std::uint64_t>(cols),
                         ld),
          what);
    if (c.batch <= 1) return;
    const auto count = static_cast<std::int32_t>(c.batch);
    check(layout_set_(*l, lt::kLayoutBatchCount, &count, sizeof count), what);
    check(layout_set_(*l, lt::kLayoutBatchStride, &stride, sizeof stride), what);
  };
  layout(&out->a, c.ab, c.trans_a ? c.k : c.m, c.trans_a ? c.m : c.k, c.lda, c.stride_a, "describing A");
  layout(&out->b, c.ab, c.trans_b ? c.n : c.k, c.trans_b ? c.k : c.n, c.ldb, c.stride_b, "describing B");
  layout(&out->d, c.d, c.m, c.n, c.ldd, c.stride_d, "describing D");
  return out;
}

void* CublasLt::handle(int device) const {
  auto it = handles_.find(device);
  if (it != handles_.end()) return it->second;
  void* h = nullptr;
  check(create_(&h), "creating a handle");
  handles_[device] = h;
  return h;
}

void CublasLt::gemm(int device, const gpu::BlasCall& c, std::uint64_t a, std::uint64_t b, std::uint64_t d,
                    std::uint64_t workspace, void* stream) const {
  if (c.batch > INT32_MAX)
    throw RuntimeError("[cublasLt] " + std::to_string(c.batch) + " batches: more than int32");
  const std::int64_t esize = static_cast<std::int64_t>(dtype_size(c.ab)),
                     dsize = static_cast<std::int64_t>(dtype_size(c.d));
  const std::int64_t align_a = alignment(a, c.stride_a * esize, c.batch);
  const std::int64_t align_b = alignment(b, c.stride_b * esize, c.batch);
  const std::int64_t align_d = alignment(d, c.stride_d * dsize, c.batch);
  const Key key{device,
                static_cast<std::int64_t>(c.ab),
                static_cast<std::int64_t>(c.d),
                c.trans_a,
                c.trans_b,
                c.m,
                c.n,
                c.k,
                c.lda,
                c.ldb,
                c.ldd,
                c.batch,
                c.stride_a,
                c.stride_b,
                c.stride_d,
                align_a,
                align_b,
                align_d};
  std::lock_guard<std::mutex> lock(mu_);
  void* h = handle(device);
  auto it = plans_.find(key);
  if (it == plans_.end()) {
    Plan p;
    p.desc = describe(c);
    void* pref = nullptr;
    check(pref_create_(&pref), "creating a preference");
    struct PrefGuard {
      const CublasLt* l;
      void* p;
      ~PrefGuard() { l->pref_destroy_(p); }
    } guard{this, pref};
    const std::uint64_t ws = kWorkspace;
    check(pref_set_(pref, lt::kPrefMaxWorkspace, &ws, sizeof ws), "setting the workspace");
    const std::uint32_t al[4] = {static_cast<std::uint32_t>(align_a), static_cast<std::uint32_t>(align_b),
                                 static_cast<std::uint32_t>(align_d), static_cast<std::uint32_t>(align_d)};
    const int attr[4] = {lt::kPrefAlignA, lt::kPrefAlignB, lt::kPrefAlignC, lt::kPrefAlignD};
    for (int i = 0; i < 4; ++i) check(pref_set_(pref, attr[i], &al[i], sizeof al[i]), "setting an alignment");
    int found = 0;
    check(heuristic_(h, p.desc->op, p.desc->a, p.desc->b, p.desc->d, p.desc->d, pref, 1, &p.algo, &found),
          "choosing an algorithm");
    if (found < 1)
      throw RuntimeError("[cublasLt] no algorithm for a " + std::to_string(c.m) + " x " +
                         std::to_string(c.n) + " x " + std::to_string(c.k) + " GEMM of " +
                         std::string(dtype_name(c.ab)));
    it = plans_.emplace(key, std::move(p)).first;
  }
  const Plan& p = it->second;
  const float alpha = 1.0f, beta = 0.0f;
  void* dp = reinterpret_cast<void*>(static_cast<std::uintptr_t>(d));
  check(matmul_(h, p.desc->op, &alpha, reinterpret_cast<const void*>(static_cast<std::uintptr_t>(a)),
                p.desc->a, reinterpret_cast<const void*>(static_cast<std::uintptr_t>(b)), p.desc->b, &beta,
                dp, p.desc->d, dp, p.desc->d, p.algo.algo,
                reinterpret_cast<void*>(static_cast<std::uintptr_t>(workspace)), kWorkspace, stream),
        "matmul");
}

}  // namespace luminal::cuda
