// Ahead-of-time programs: Callable::save / luminal::load (CPU target).
//
// A saved file holds everything a call needs except a C compiler: the graph (for call
// validation and names), the kernel plan, the compile report, the bound params, and the
// shared object the JIT built. Loading re-lowers and re-renders the plan (pure C++, no
// compiler) only to check that the rendered source hashes to the one the shared object
// was built from -- a file from another Luminal version is rejected with a clear error
// instead of calling kernels with a different buffer layout -- then dlopens the saved
// object from a private temporary file.
//
// Layout: "LUMINAL-AOT" magic, format version, then length-prefixed little-endian
// fields (see aot.cpp); the shared object is the last field. Any truncation or
// inconsistency is a RuntimeError naming the file.
#pragma once

#include <string>

#include "compiler/plan.hpp"
#include "graph/graph_impl.hpp"

namespace luminal::aot {

/// Serialization of the pieces (exposed for tests).
std::string serialize_graph(const detail::GraphImpl& g);
detail::GraphImpl deserialize_graph(const std::string& bytes);

}  // namespace luminal::aot
