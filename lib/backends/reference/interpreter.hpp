// The reference interpreter: executes a graph's primitives directly. It defines what
// every program means and is the oracle of every other backend's tests.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "backends/reference/view.hpp"
#include "graph/graph_impl.hpp"
#include "luminal/host_tensor.hpp"

namespace luminal::detail::reference {

/// Evaluates every output of `g`. `dims` binds every dim variable the live nodes use;
/// `tensors` maps every input and param name to data of the right shape and dtype (the
/// Callable has validated them). Input memory is read in place, never copied.
std::map<std::string, HostTensor> run(const GraphImpl& g, const DimBindings& dims,
                                      const std::map<std::string, const HostTensor*>& tensors,
                                      Stats* stats = nullptr);

/// The SPMD semantics (graph/primitives.hpp): `world` copies of `g` run in lockstep,
/// copy r with "%rank" bound to r, reading tensors[r] (or tensors[0] on every rank when
/// one map is given); collectives combine the copies' values. Returns each rank's outputs.
/// `run` is run_spmd with one rank, for programs without collectives over several ranks.
std::vector<std::map<std::string, HostTensor>> run_spmd(
    const GraphImpl& g, int64_t world, const DimBindings& dims,
    const std::vector<std::map<std::string, const HostTensor*>>& tensors, Stats* stats = nullptr);

/// The number of ranks the live collectives of `g` are written for (1 when none).
int64_t collective_world(const GraphImpl& g);

}  // namespace luminal::detail::reference
