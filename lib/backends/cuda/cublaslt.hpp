// cuBLASLt through dlopen (libcublasLt.so.13, .12 or .11): the vendor GEMM that runs
// the library GEMM kernels the search may choose (gpu/blas_gemm.hpp). Declared by hand,
// as the driver is: nothing links it, and no CUDA header is needed to build. The ABI
// constants below are cuBLASLt's enumerators; tests/gpu checks them against cublasLt.h
// where the toolkit is installed, and that each descriptor they build is accepted.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "backends/gpu/blas_gemm.hpp"

namespace luminal::cuda {

namespace lt {
inline constexpr int kCompute32F = 68;                   // CUBLAS_COMPUTE_32F
inline constexpr int kR32F = 0, kR16F = 2, kR16BF = 14;  // cudaDataType_t
inline constexpr int kOpN = 0, kOpT = 1;                 // cublasOperation_t
inline constexpr int kDescTransA = 3, kDescTransB = 4;   // cublasLtMatmulDescAttributes_t
inline constexpr int kLayoutBatchCount = 5;              // CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT (int32)
inline constexpr int kLayoutBatchStride = 6;             // ..._STRIDED_BATCH_OFFSET (int64)
inline constexpr int kPrefMaxWorkspace = 1;              // CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES
inline constexpr int kPrefAlignA = 5, kPrefAlignB = 6, kPrefAlignC = 7,
                     kPrefAlignD = 8;  // ..._MIN_ALIGNMENT_*
/// cublasLtMatmulHeuristicResult_t
struct HeuristicResult {
  std::uint64_t algo[8];
  std::size_t workspace;
  int state;
  float waves;
  int reserved[4];
};
}  // namespace lt

class CublasLt {
 public:
  /// The process-wide library, or null with `why` set (not installed, too old).
  static const CublasLt* get(std::string* why = nullptr);
  /// "cuBLASLt 13.1.0".
  const std::string& version() const { return version_; }
  /// Workspace each stream's calls are given (what cuBLASLt asks for on Hopper).
  static constexpr std::size_t kWorkspace = std::size_t{32} << 20;

  /// The descriptors of one call: its operation and the four matrix layouts (C is D).
  /// Needs no device: tests build them on machines without one.
  struct Descriptors {
    const CublasLt* lib = nullptr;
    void* op = nullptr;
    void* a = nullptr;
    void* b = nullptr;
    void* d = nullptr;
    Descriptors() = default;
    Descriptors(const Descriptors&) = delete;
    Descriptors& operator=(const Descriptors&) = delete;
    ~Descriptors();
  };
  /// Throws RuntimeError "[cublasLt] <what>: <status>".
  std::unique_ptr<Descriptors> describe(const gpu::BlasCall& c) const;

  /// `c` on `stream`, its operands at these device addresses (offsets applied), with
  /// kWorkspace bytes at `workspace`; `device` is current. The algorithm is chosen once
  /// per shape and alignment (cuBLASLt's heuristic) and kept.
  void gemm(int device, const gpu::BlasCall& c, std::uint64_t a, std::uint64_t b, std::uint64_t d,
            std::uint64_t workspace, void* stream) const;

 private:
  void check(int status, const char* what) const;
  void* handle(int device) const;

  int (*create_)(void**) = nullptr;
  std::size_t (*get_version_)() = nullptr;
  const char* (*status_string_)(int) = nullptr;
  int (*desc_create_)(void**, int, int) = nullptr;
  int (*desc_destroy_)(void*) = nullptr;
  int (*desc_set_)(void*, int, const void*, std::size_t) = nullptr;
  int (*layout_create_)(void**, int, std::uint64_t, std::uint64_t, std::int64_t) = nullptr;
  int (*layout_destroy_)(void*) = nullptr;
  int (*layout_set_)(void*, int, const void*, std::size_t) = nullptr;
  int (*pref_create_)(void**) = nullptr;
  int (*pref_destroy_)(void*) = nullptr;
  int (*pref_set_)(void*, int, const void*, std::size_t) = nullptr;
  int (*heuristic_)(void*, void*, void*, void*, void*, void*, void*, int, lt::HeuristicResult*,
                    int*) = nullptr;
  int (*matmul_)(void*, void*, const void*, const void*, void*, const void*, void*, const void*, const void*,
                 void*, void*, void*, const void*, void*, std::size_t, void*) = nullptr;
  std::string version_;

  // A call's descriptors and algorithm, by its shape, alignments and device.
  using Key = std::array<std::int64_t, 18>;
  struct Plan {
    std::unique_ptr<Descriptors> desc;
    lt::HeuristicResult algo{};
  };
  mutable std::mutex mu_;
  mutable std::map<int, void*> handles_;  // per device, kept for the process
  mutable std::map<Key, Plan> plans_;
};

}  // namespace luminal::cuda
