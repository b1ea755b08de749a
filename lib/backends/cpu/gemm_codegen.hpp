// Generated SGEMM for the CPU backend: C source for a packed, register-tiled GEMM
// (BLIS-style loop nest jc -> pc -> ic -> (jr, ir) -> micro-kernel) specialised for one
// ISA and one micro tile. The micro-kernel keeps an mr x nr block of C in vector
// registers (AVX-512: nr/16 zmm per row; AVX2: nr/8 ymm per row) and runs over a packed
// kc-long panel of A (mr-wide) and B (nr-wide, 64-byte aligned). Edge tiles go through a
// stack tile, so any M, N, K (including 0 and 1) work. The output is cut into
// independent tasks run on the call's threads (lm_runtime::parallel_for); each task packs
// into its thread's scratch (lm_runtime::scratch: carved from the call's arena, so a
// steady-state call allocates nothing). After the last K block each tile is handed,
// still hot in L1, to an optional epilogue callback:
//   void epi(void* ctx, float* c, int64_t ldc, int64_t i0, int64_t j0, int64_t rows, int64_t cols)
// where c points at C[i0, j0]; the driver copies the context (at most
// kGemmEpiContextMax bytes) into its tasks' arguments.
#pragma once

#include <string>

#include "luminal/dtype.hpp"

namespace luminal::cpu {

enum class CpuIsa { Generic, Avx2, Avx512 };

/// The best ISA of this host (AVX-512F > AVX2+FMA > generic C).
CpuIsa host_isa();
const char* isa_name(CpuIsa isa);

/// A micro tile legal for `isa` (nr a multiple of the vector width; mr * nr/width
/// accumulators fitting the register file); throws InternalError otherwise.
void check_micro_tile(CpuIsa isa, int mr, int nr);
/// The same check without throwing: can `isa` hold an mr x nr micro tile?
bool micro_tile_fits(CpuIsa isa, int mr, int nr);
/// Default tile for an ISA (tuned on a 2-core Zen 4 with AVX-512; see docs/cpu-backend.md).
struct GemmTileDefaults {
  int mr, nr, mc, kc, nc;
};
GemmTileDefaults default_gemm_tile(CpuIsa isa);

/// Bytes of epilogue context a driver copies into its tasks (LM_EPI_CTX_MAX in the C).
constexpr int kGemmEpiContextMax = 128;

/// Scratch bytes one thread of gemm_source's driver asks for (packed A and B blocks)
/// for an M x N x K product with cache blocks mc, nc, kc and micro tile mr x nr; 0 when
/// the product takes a path that packs nothing (M, N or K <= 0; few rows with B
/// contiguous along rows or columns; few columns with A contiguous along rows).
int64_t gemm_scratch_bytes(int64_t M, int64_t N, int64_t K, int64_t csa, int64_t rsb, int64_t csb, int mr,
                           int nr, int mc, int nc, int kc);

/// Name of the driver function emitted by gemm_source(isa, mr, nr, b_dtype).
std::string gemm_function_name(CpuIsa isa, int mr, int nr, DType b_dtype = DType::f32);
/// C source (needs the prelude's includes) defining
///   static void <gemm_function_name>(int64_t M, int64_t N, int64_t K,
///       const float* A, int64_t rsa, int64_t csa, const B_T* B, int64_t rsb, int64_t csb,
///       float* C, int64_t ldc, int64_t MC, int64_t NC, int64_t KC, lm_epi_fn epi,
///       const void* ctx, int64_t ctx_bytes, const lm_runtime* rt, void* cx, int tid, int tail);
/// and <gemm_function_name>_seg, the same with a segmented B (kernel::Gemm::b_segments):
///   (M, N, K, A, rsa, csa, int64_t nseg, const B_T* const* sB, const int64_t* srs,
///    const int64_t* scs, const int64_t* sn0, float* C, ldc, ...): columns
///   [sn0[s], sn0[s + 1] or N) of B are the columns of view s (sB[s], row stride srs[s],
///   column stride scs[s]); nseg <= kernel::kMaxGemmSegments,
/// plus lm_epi_fn when not yet defined. tid < 0: the caller, which may run the tasks on
/// the call's team; tid >= 0: run everything on this thread as member tid. tail: the
/// kernel issues nothing after this product (its tasks need not be waited for). Needs
/// the renderer's ABI declarations (lm_runtime, lm_chunk) and the prelude. Includes
/// <immintrin.h> for the SIMD ISAs.
/// B_T is float, or uint16_t for f16/bf16 weights (`b_dtype`): B is converted to f32
/// while it is packed (or, on the few-rows path, as it is streamed), so a half-precision
/// weight is read at half the bytes and never copied to f32 as a whole; accumulation is
/// f32 either way.
std::string gemm_source(CpuIsa isa, int mr, int nr, DType b_dtype = DType::f32);

}  // namespace luminal::cpu
