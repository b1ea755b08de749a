// The roofline cost of one kernel: the slower of its arithmetic and its memory traffic,
// plus a launch. Fusing two kernels wins exactly when it saves bytes and launches; the
// model, not a pass order, decides. See docs/cost-model.md.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "cost/target_desc.hpp"

namespace luminal::detail {

/// What a kernel does, counted by whoever builds the kernel node.
struct KernelWork {
  double flops = 0;            // adds, multiplies, compares (an FMA counts 2)
  double transcendentals = 0;  // exp/log/sin/tanh... evaluations
  /// Of transcendentals: the tanh evaluations, which fast math computes with two
  /// special-function ops and more plain instructions than the others
  /// (TargetDesc::fast_tanh_flops).
  double tanhs = 0;
  /// Of flops: f32 reciprocals and square roots, one special-function op each under fast
  /// math (rcp, sqrt .approx).
  double special_unary = 0;
  double bytes_read = 0;       // from buffers the kernel reads (each element once)
  /// Of bytes_read: from the program's inputs and params (a call's weights, its KV cache).
  double bytes_leaf = 0;
  /// The program's leaves are too many to stay in the last-level cache from one call to
  /// the next, so bytes_leaf streams from memory however little the kernel reads (set by
  /// the search for the whole program; both cost models price it).
  bool leaves_from_memory = false;
  double bytes_written = 0;
  /// Bytes of each buffer read (the slots; their sum is bytes_read). A buffer that fits
  /// in the last-level cache streams at cache speed even when the kernel's total traffic
  /// does not fit (a GEMM's activations beside a stream of weights: they were just
  /// written by the producer). Empty: bytes_read is judged as a whole.
  std::vector<double> read_buffers;
  /// Round trips through the kernel's own scratch (a GEMM prologue's packed operand, a
  /// hoisted broadcast): cache-resident when it fits, whatever the kernel's other traffic.
  double bytes_scratch = 0;
  /// Bytes of a GEMM B operand that is a concat of stored tensors (sibling products merged,
  /// matmul-siblings). The CPU GEMM reads it in place, segment by segment (free); the GPU
  /// renderers copy it into one buffer first (a round trip).
  double bytes_concat = 0;
  /// Kernels the lowering runs before this one, each a launch of its own on a GPU: a
  /// reduction the kernel's accumulator does not take (RMSNorm's sum of squares under a
  /// projection), an operand computed into scratch, a hoisted broadcast value
  /// (kernel/lower: materialize, materialize_operand). The split attention's combine is
  /// the attention model's own.
  double staged_kernels = 0;
  /// A GEMM whose operand is computed by a row prologue (ir::row_prologue): computing that
  /// operand once -- its flops, transcendentals and the bytes it reads. Every column block
  /// of the skinny GEMM computes it for its rows; `prologue_stat`: from a row statistic
  /// (RMSNorm's), not elementwise.
  double prologue_flops = 0, prologue_transcendentals = 0, prologue_bytes = 0;
  bool prologue = false, prologue_stat = false;
  double parallelism = 1e9;  // independent output elements (limits core/SM usage)
  /// Which code runs it; the target states each engine's fraction of peak.
  enum class Engine { Loops, GeneratedGemm, LibraryGemm, Attention, Collective } engine = Engine::Loops;
  /// Collectives: bytes this rank sends or receives over the link, and the link steps
  /// (each pays the link's latency) -- see TargetDesc::link.
  double link_bytes = 0;
  double link_steps = 0;
  /// Fraction of the engine's efficiency this kernel keeps: for a generated GEMM, the
  /// share of each tile that holds real output; 1 otherwise.
  double engine_fraction = 1.0;
  /// A generated GEMM's tile area (rows x cols): smaller tiles than the target's largest
  /// reuse each loaded value less. 0: not a tiled GEMM.
  double tile_area = 0;
  // The shape facts a GPU launch is costed with (cost/gpu_cost.hpp):
  double gemm_m = 0, gemm_n = 0, gemm_k = 0;  // a GEMM's product (per batch point)
  double batches = 1;                         // batch points of a GEMM
  double rows = 0, row_length = 0;            // a reduction's rows and elements per row
  double attention_rows = 0, attention_keys = 0;  // an attention's query rows (all heads) and keys
  double attention_depth = 0, attention_width = 0;  // ... its q.k depth dk and value width dv
  double attention_sharing = 1;                     // ... query rows that read each K element
  double attention_kv_bytes = 4;                    // ... bytes a stored K or V element takes
  std::vector<int64_t> launch;                // the kernel node's launch alternative
  bool half_operands = false;                 // a GEMM whose operands are f16/bf16 values
  bool bf16_operands = false;                 // ... and they are bf16
};

/// Estimated seconds for one execution of a kernel on `t`.
double kernel_seconds(const TargetDesc& t, const KernelWork& w);
/// The launches kernel_seconds charges a kernel on `t`: its own, those staged before it
/// (KernelWork::staged_kernels) and, on a GPU, the copy of a concatenated B into one
/// buffer that every GEMM engine but the skinny one needs first.
int priced_launches(const TargetDesc& t, const KernelWork& w);

/// Seconds to stream `bytes` once: at cache speed when they fit in the last-level cache.
inline double stream_seconds(const TargetDesc& t, double bytes) {
  return bytes / (bytes <= t.llc_bytes ? t.cache_bandwidth : t.mem_bandwidth);
}

/// The program's leaves cannot stay in the cache between calls and this kernel reads some.
inline bool leaves_stream_from_memory(const KernelWork& w) {
  return w.leaves_from_memory && w.bytes_leaf > 0;
}

/// Seconds for a kernel's traffic (read and written) as one stream. When the program's
/// leaves cannot stay in the cache from one call to the next (leaves_from_memory), the
/// kernel's share of them comes from memory however little it is -- a 16 MB projection's
/// weights do not wait in a 32 MB L3 while 800 MB of other weights stream through -- and
/// the rest from the cache if it fits. Both cost models price traffic through this.
inline double traffic_seconds(const TargetDesc& t, const KernelWork& w) {
  const double bytes = w.bytes_read + w.bytes_written;
  if (leaves_stream_from_memory(w))
    return w.bytes_leaf / t.mem_bandwidth + stream_seconds(t, std::max(bytes - w.bytes_leaf, 0.0));
  return stream_seconds(t, bytes);
}

}  // namespace luminal::detail
