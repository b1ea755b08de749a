// A readable listing of a graph, one node per line, for debugging and for messages:
//   %3 = add(%1, %2) : f32 (B, 16)   [matmul at model.cpp:42]
#pragma once

#include <string>

#include "graph/graph_impl.hpp"

namespace luminal::detail {

std::string dump(const GraphImpl& g);

}  // namespace luminal::detail
