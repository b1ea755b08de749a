// A rank's shard of a weight stored compactly (docs/distributed.md, "Binding only a
// shard"): the block of a param's elements its program reads (dist::param_regions), as a
// tensor of the block's own shape. The CPU backend stores such params as the block
// (kernel::Program::blocks); these helpers move between the whole weight and its block.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "luminal/callable.hpp"
#include "luminal/host_tensor.hpp"

namespace luminal::dist {

/// The block's shape: end - start per axis.
std::vector<int64_t> block_dims(const ParamRegion& r);

/// Whether `r` lies inside `shape` and is not empty on any axis.
bool block_inside(const ParamRegion& r, const std::vector<int64_t>& shape);

/// The elements of block `r` of `whole` (row-major over the block's shape), copied from
/// `whole` one contiguous run at a time: the rows of a column split are one run, each row
/// of a row split one. `r` must lie inside whole's shape. The result is a read-only view
/// owning its memory: copies of it share the block.
HostTensor copy_block(const HostTensor& whole, const ParamRegion& r);

/// "(512, 256) -- elements [0:512, 256:512] of (512, 512)", for messages.
std::string block_text(const ParamRegion& r, const std::vector<int64_t>& whole);

}  // namespace luminal::dist
