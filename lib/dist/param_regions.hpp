// Which part of each weight one rank's program reads (docs/distributed.md, "Binding only
// a shard"): after %rank is fixed, a sharded weight is read only through slices of this
// rank's block. The region is found from the kernel bodies, conservatively -- any read the
// walk does not understand counts as the whole weight -- so binding only the region's
// bytes (bind_safetensors) can never change a result.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "compiler/plan.hpp"
#include "graph/graph_impl.hpp"
#include "luminal/callable.hpp"

namespace luminal::dist {

/// A box of a param: per axis, elements [start, end).
using Region = ParamRegion;

/// The params of `graph` that `plan` (a rank's plan, "%rank" already substituted) reads
/// only part of, each with the smallest box holding every element any kernel reads. A
/// read through anything but permutes, slices, reshapes without a copy and expands counts
/// as the whole param; params read whole, not at all, or of non-constant shape are absent.
std::map<std::string, Region> param_regions(const compiler::KernelPlan& plan, const detail::GraphImpl& graph);

}  // namespace luminal::dist
