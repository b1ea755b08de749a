// The reference interpreter: executes a graph's primitives directly. It defines what
// every program means and is the oracle of every other backend's tests.
#pragma once

#include <map>
#include <string>

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

}  // namespace luminal::detail::reference
