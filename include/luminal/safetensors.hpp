// Weights from safetensors files (the format Hugging Face checkpoints use).
#pragma once

#include <map>
#include <span>
#include <string>

#include "luminal/host_tensor.hpp"

namespace luminal {

/// Every tensor of a safetensors file (dtypes F32, F16, BF16, I32, BOOL) by name, as
/// zero-copy read-only views of a mapping of the file that stays alive while any view
/// (or a Callable it was bound to) does.
///
/// `path` may also be a sharded checkpoint's index (`*.safetensors.index.json`: every
/// shard its `weight_map` names is loaded, and each name must be in the shard the index
/// says) or a folder holding `model.safetensors` or `model.safetensors.index.json`.
///
/// Everything in the file is checked before a view is made: the header length, the JSON,
/// every name (valid UTF-8, no duplicates), dtype, shape and data offsets (inside the
/// file, matching the shape's byte count, not overlapping another tensor). A malformed
/// file throws RuntimeError (an lm::Error) naming the file and what is wrong; nothing is
/// ever read outside the file. A tensor whose data is not aligned for its dtype is
/// copied into an owning tensor instead of viewed.
std::map<std::string, HostTensor> load_safetensors(const std::string& path);

/// How load_safetensors(path, options) places the tensors.
struct LoadOptions {
  /// Copy the tensors out of the file mapping into one anonymous allocation backed by
  /// transparent huge pages (2 MiB pages where the kernel grants them: MADV_HUGEPAGE),
  /// as views that keep it alive; the mapping is released. For weights a program streams
  /// in full every call (LLM decode): 4 KiB pages of a file mapping cost a TLB miss
  /// every 4 KiB. The price: the bytes are copied once and held privately (no page cache
  /// shared with other processes). Default false: zero-copy views of the mapping.
  bool huge_pages = false;
};

/// load_safetensors(path) placed as `options` says; the same checks and errors.
std::map<std::string, HostTensor> load_safetensors(const std::string& path, const LoadOptions& options);

/// Copies of `tensors` in one anonymous allocation on 2 MiB boundaries, advised
/// MADV_HUGEPAGE, each 64-byte aligned: read-only views that keep the allocation alive
/// while any of them (or a Callable they are bound to) lives.
std::map<std::string, HostTensor> copy_to_huge_pages(const std::map<std::string, HostTensor>& tensors);

class Callable;

/// Binds every param of `fn` from the safetensors file (or index, or folder) at `path`,
/// by name, reading only the part each param's program reads (Callable::param_region).
/// For one rank of a sharded program that is its block of each split weight: on the CPU
/// target the program stores such a weight as its block (docs/distributed.md), so only
/// the block's bytes are copied, into a tensor of the block's shape -- the rank holds 1/P
/// of the weight -- and the file pages read for it are released again; programs that
/// index the whole shape (the reference target) get the block in memory of the full shape
/// whose other pages are never touched (they read as zeros, and the program never reads
/// them). Whole params are bound as zero-copy views of the mapped file, as
/// load_safetensors gives them. A missing tensor, or one of another dtype or shape than
/// the param, throws RuntimeError.
void bind_safetensors(Callable& fn, const std::string& path);
/// The same for several programs of one model (a prefill and a decode step): a block
/// that several of them read is copied once and shared.
void bind_safetensors(std::span<Callable* const> fns, const std::string& path);

}  // namespace luminal
