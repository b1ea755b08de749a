// How a generated GEMM's launch alternative (ir::KernelSpec::launch, the search's choice)
// is spelled for GPU targets. One spelling read by the schedule rules that make the
// alternatives (rules/schedule_gpu.cpp), the cost model that ranks them (gpu_cost.cpp)
// and the renderer that emits them (backends/gpu/gpu_renderer.cpp):
//
//   {bm, bn, bk}                 f32 FMA thread-block tile (engine Fma)
//   {bm, bn, bk, engine}         engine: 0 Fma, 1 Mma (mma.sync m16n8k16, bk = 32),
//                                2 Skinny (below)
//   {bm, bn, bk, 2, ks, vec}     Skinny: a block computes bm (<= 8) rows x bn columns with
//                                its 256 threads split ks ways along K (split-K inside the
//                                block, partials summed through shared memory in a fixed
//                                order); vec = halves (or floats) per 128-bit load; bk =
//                                kSkinnyStaged: an operand a row prologue could compute
//                                (ir::row_prologue) is staged by kernels of its own instead
//   Fma and Mma take an optional 5th element vec too: 8 for f16/bf16, 4 for f32 = 128-bit
//   global loads of the tiles' k-contiguous operands (guarded at run time by alignment,
//   scalar loads otherwise); 1 or absent = scalar loads.
//   {bm, bn, 32, 3, 8, stages, wm, wn}
//                                MmaAsync (CUDA sm_80+): mma.sync m16n8k16 fed by ldmatrix
//                                from a `stages`-deep ring of shared tiles that cp.async
//                                fills (16-byte copies along each operand's contiguous
//                                side, guarded at run time by alignment; scalar stores
//                                otherwise); (bm/wm) x (bn/wn) warps, each a wm x wn tile.
#pragma once

#include <cstdint>
#include <vector>

namespace luminal::detail {

enum class GpuGemmEngine : int64_t { Fma = 0, Mma = 1, Skinny = 2, MmaAsync = 3 };

/// Flash-decoding on the GPU targets (kernel::Attention::Split, which the GPU lowering
/// makes and the cost model prices): an attention over at most kAttentionSplitRows query
/// rows and more than 2 x kAttentionSplitKeys keys (or a symbolic count) has its keys cut
/// into attention_ranges(keys) ranges, a block per (rows, range). Up to 32 ranges of at
/// least 128 keys: a decode step at Llama-3-8B sizes (8 KV heads, a block for the 4 query
/// rows of each) is then 256 blocks, two for each of an H100's or H200's 132 SMs -- the
/// warps whose loads in flight hide the memory's latency (with 16 ranges, one block an
/// SM had a quarter of what the bandwidth needs, gpu_cost.cpp).
inline constexpr int64_t kAttentionSplitRows = 256;
inline constexpr int64_t kAttentionSplitKeys = 128;
inline constexpr int64_t kAttentionMaxSplits = 32;
/// clamp(ceil(keys / kAttentionSplitKeys), 1, kAttentionMaxSplits).
inline int64_t attention_ranges(int64_t keys) {
  const int64_t r = (keys + kAttentionSplitKeys - 1) / kAttentionSplitKeys;
  return r < 1 ? 1 : r > kAttentionMaxSplits ? kAttentionMaxSplits : r;
}

/// An attention's block takes this many of a batch point's query rows at most: the rows
/// of one batch point read the same K and V (a decode step's G query heads of one KV head,
/// kernel/lower/group_heads.hpp; a prefill's queries), so every K and V element a block
/// loads feeds that many products instead of one. (Each row keeps a q of up to 1024
/// floats and a chunk of scores in shared memory: 8 rows stay under 48 KB.)
inline constexpr int64_t kAttentionMaxBlockRows = 8;
/// The smallest power of two >= x (the attention's transposed warp sum pads to it).
inline int64_t pow2_at_least(int64_t x) {
  int64_t q = 1;
  while (q < x) q *= 2;
  return q;
}
/// The attention's trips (gpu_renderer's attention()): a warp's dot products take this
/// many keys a trip, their loads issued before the first product waits -- 4, fewer when
/// a lane's U x R sums (padded to a power of two) would pass 16 or the warp's lanes.
inline int64_t attention_key_unroll(int64_t rows_per_block, int64_t warp) {
  int64_t u = 4;
  while (u > 1 && (u * pow2_at_least(rows_per_block) > 16 || pow2_at_least(u * rows_per_block) > warp))
    u /= 2;
  return u;
}
/// The attention's dot products with lanes across keys (gpu_renderer's dots_wide): a K
/// row's depth split among G = dk / E lanes, E elements a lane in one 16-byte load (8
/// halves, 4 floats; 8 bytes where 16 would pass `rows` x E > 32 q registers a lane), so a
/// warp instruction reads warp / G whole rows and a key's partial sums meet over G lanes,
/// not 32 (the decode step: 38 PTX instructions a key where lanes across the depth, with
/// scalar loads and a warp sum, took 55). E where G is a power of two of at least the rows (the transposed
/// sum's values spread over the group's lanes) and at most the warp; 1 (not taken)
/// otherwise: other depths, element sizes, or rows.
inline int64_t attention_key_vector(int64_t dk, int64_t elem_bytes, int64_t rows, int64_t warp) {
  if ((elem_bytes != 2 && elem_bytes != 4) || dk <= 0) return 1;
  for (int64_t e = 16 / elem_bytes; e >= 8 / elem_bytes && e > 1; e /= 2) {
    if (dk % e != 0 || rows * e > 32) continue;
    const int64_t g = dk / e;
    if (g > warp || (g & (g - 1)) != 0 || g < pow2_at_least(rows)) continue;
    return e;
  }
  return 1;
}
/// ... and its trips: a lane takes this many keys a trip (its U x R sums, padded to a
/// power of two, spread over the G = dk / E lanes of its key; at most 16 a lane).
inline int64_t attention_wide_key_unroll(int64_t rows, int64_t lanes) {
  int64_t u = 4;
  while (u > 1 && (u * rows > 16 || pow2_at_least(u * rows) > lanes)) u /= 2;
  return u;
}

/// ... and P V's thread takes this many keys a trip, their V loads first -- 4 where it
/// takes several columns (attention_value_columns): its 8-byte loads keep as many bytes
/// in flight, and 8 keys of 4 columns and 4 rows unrolled doubled NVRTC's time for the
/// decode step's attention (the block's cold compile 1.4 -> 2.0 s).
inline constexpr int64_t kAttentionValueUnroll = 8;
inline constexpr int64_t kAttentionWideValueUnroll = 4;

/// The rows an attention block's softmax reduces together (gpu_renderer's softmax_rows):
/// as many as the warps' partials of which fit one warp's lanes -- 4 on wave32, 16 on
/// wave64 with 256 threads; 1 for one row (the prelude's block reductions).
inline int64_t attention_softmax_batch(int64_t rows, int64_t threads, int64_t warp) {
  const int64_t per = warp / (threads / warp);
  return rows <= 1 ? 1 : rows < per ? rows : per < 1 ? 1 : per;
}
/// ... and the floats of its reductions' shared scratch: a batch's warps' partials and
/// its results.
inline int64_t attention_softmax_scratch(int64_t rows, int64_t threads, int64_t warp) {
  return (threads / warp + 1) * attention_softmax_batch(rows, threads, warp);
}

/// P V's columns a thread (gpu_renderer's attention(); the cost model prices the same):
/// 8 bytes of a V row a load -- 4 halves or 2 floats, so one load, the block's weights
/// read once from shared memory for all of them and a warp per key where a column a
/// thread took dv / 32 warps -- when every pass of `pass_columns` (the block's columns,
/// `dv` a multiple of it) splits into whole key groups (threads / (pass_columns / C)) and
/// the key groups' sums, R x C a thread, fit shared memory beside `other_shared` bytes
/// (48 KB of static shared memory a block). 1 otherwise, and for other element sizes.
/// (The renderer takes 1 too where V's columns are not contiguous; an unaligned V, known
/// only at run time, takes the same layout with C scalar loads.)
inline int64_t attention_value_columns(int64_t dv, int64_t pass_columns, int64_t elem_bytes, int64_t rows,
                                       int64_t threads, int64_t other_shared) {
  if (elem_bytes != 2 && elem_bytes != 4) return 1;
  const int64_t c = 8 / elem_bytes;
  if (dv <= 0 || pass_columns <= 0 || dv % pass_columns != 0 || pass_columns % c != 0) return 1;
  const int64_t per_group = pass_columns / c;
  if (threads % per_group != 0) return 1;
  if (rows * threads * c * 4 + other_shared > 48 * 1024) return 1;
  return c;
}

/// Rows per block of an attention with `m` rows per batch point: the largest count
/// up to kAttentionMaxBlockRows that divides m (so no block has rows past the end).
inline int64_t attention_block_rows(int64_t m) {
  for (int64_t r = m < kAttentionMaxBlockRows ? m : kAttentionMaxBlockRows; r > 1; --r)
    if (m % r == 0) return r;
  return 1;
}

/// Side work (kernel::Kernel::side): an elementwise kernel of at most this many elements
/// runs as extra blocks of a later kernel's launch instead of a launch of its own, where
/// no kernel up to that one reads what it writes or writes what it reads -- a prefill's
/// new K rows (128 x 1024) beside its V rows. A launch costs a few microseconds on every
/// GPU the cost model describes; a million elements at the bandwidth, about one.
inline constexpr int64_t kSideWorkMaxElements = int64_t{1} << 20;
/// Tail work (kernel::Kernel::tail): an elementwise kernel of at most this many elements
/// runs in the launch of the kernel before it, by its last block -- a few trips of its
/// threads, each a round trip to L2, against a launch (gpu_cost: folded_launch_seconds).
inline constexpr int64_t kTailWorkMaxElements = 2048;

/// Skinny with 128-bit loads and at most this many rows: two K steps' loads in flight per
/// thread (the renderer's pair loop; more rows' registers would spill).
inline constexpr int64_t kSkinnyPairRows = 2;

/// Skinny with a row prologue (kernel::Gemm::a_prologue): the block's A rows, f32 in
/// shared memory, take at most this many bytes (rows x a chunk of K x 4).
inline constexpr int64_t kSkinnyPrologueBytes = 32 * 1024;

/// Skinny's bk (otherwise unused) asking for a computed A operand to be staged, not
/// computed by the blocks: at many rows or columns the blocks' recomputation can cost
/// more than a staged copy, and the cost model weighs both (gpu-gemm-skinny offers both).
inline constexpr int64_t kSkinnyStaged = 1;

/// The K chunk a skinny GEMM's row prologue computes at a time (gpu_renderer's
/// gemm_skinny; the cost model sizes its shared memory with it): all of K (`k`; 0 when
/// symbolic) where the block's `rows` fit kSkinnyPrologueBytes, else the most that fit, a
/// multiple of twice `step` -- the K positions the block's threads take in one step -- so
/// each thread takes the K positions one pass over all of K would, in its order.
inline int64_t skinny_prologue_chunk(int64_t rows, int64_t step, int64_t k) {
  const int64_t fit = kSkinnyPrologueBytes / 4 / (rows < 1 ? 1 : rows), unit = 2 * (step < 1 ? 1 : step);
  if (k > 0 && k <= fit) return k;
  return fit < unit ? unit : fit / unit * unit;
}

struct GpuGemmLaunch {
  int64_t bm = 64, bn = 64, bk = 16;
  GpuGemmEngine engine = GpuGemmEngine::Fma;
  int64_t ks = 1;   ///< Skinny: K slices per block
  int64_t vec = 1;  ///< elements per global load of a k-contiguous operand (1: scalar)
  int64_t stages = 2;        ///< MmaAsync: shared tiles in flight
  int64_t wm = 64, wn = 64;  ///< MmaAsync: a warp's tile

  static GpuGemmLaunch from(const std::vector<int64_t>& l) {
    GpuGemmLaunch g;
    if (l.size() < 3) return g;
    g.bm = l[0];
    g.bn = l[1];
    g.bk = l[2];
    if (l.size() > 3 && l[3] >= 0 && l[3] <= 3) g.engine = static_cast<GpuGemmEngine>(l[3]);
    if (g.engine == GpuGemmEngine::Skinny) {
      g.ks = l.size() > 4 ? l[4] : 32;
      g.vec = l.size() > 5 ? l[5] : 1;
    } else if (l.size() > 4) {
      g.vec = l[4];
    }
    if (g.engine == GpuGemmEngine::MmaAsync) {
      if (l.size() > 5) g.stages = l[5];
      if (l.size() > 7) {
        g.wm = l[6];
        g.wn = l[7];
      }
    }
    if (g.vec < 1) g.vec = 1;
    return g;
  }
};

/// A launch key of the few-rows engine: the one question the lowering (emit_gemm.cpp),
/// the cost model and the kernel-body predicates (ir::row_prologue) all ask of it.
inline bool skinny_launch(const std::vector<int64_t>& launch) {
  return GpuGemmLaunch::from(launch).engine == GpuGemmEngine::Skinny;
}

/// MmaAsync's shared ring in bytes (gpu_renderer's gemm_mma_async): a k-tile of 32 halves
/// of every row of both operands, `stages` times. The renderer falls back to plain Mma
/// where it exceeds the static limit.
inline int64_t mma_async_shared_bytes(const GpuGemmLaunch& L) {
  return 64 * (L.bm + L.bn) * (L.stages < 2 ? 2 : L.stages);
}

}  // namespace luminal::detail
