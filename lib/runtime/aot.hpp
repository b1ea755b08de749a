// Ahead-of-time programs: Callable::save / luminal::load (CPU target).
//
// A saved file holds everything a call needs except a C compiler: the graph (for call
// validation and names), the kernel plan, the compile report, the bound params, the CPU
// features the code was compiled for, and the shared object the JIT built. Loading
// re-lowers and re-renders the plan (pure C++, no compiler) only to check that the
// rendered source hashes to the one the shared object was built from -- a file from
// another Luminal version is rejected with a clear error instead of calling kernels with
// a different buffer layout -- then loads the object from an anonymous memory file
// (memfd; nothing written under a name anyone can predict or race).
//
// Layout (format 2): "LUMINAL-AOT" magic, format version, length-prefixed little-endian
// fields (see aot.cpp; the shared object is the last), then a 16-byte trailer: a 64-bit
// checksum of every byte before it and "LMAOTEND". The checksum is verified before
// anything else is read, so a bit flip anywhere (graph, params, code) is a RuntimeError,
// never a crash, a hang or a wrong answer; a CPU that lacks a recorded feature (a file
// saved on an AVX-512 machine, loaded on an AVX2 one) is a RuntimeError naming them.
// Any truncation or inconsistency is a RuntimeError naming the file.
#pragma once

#include <memory>
#include <string>

#include "compiler/plan.hpp"
#include "graph/graph_impl.hpp"
#include "runtime/executable.hpp"

namespace luminal::aot {

/// Serialization of the pieces (exposed for tests and the plan cache, runtime/plan_cache).
std::string serialize_graph(const detail::GraphImpl& g);
detail::GraphImpl deserialize_graph(const std::string& bytes);
std::string serialize_plan(const compiler::KernelPlan& p);
compiler::KernelPlan deserialize_plan(const std::string& bytes);
std::string serialize_report(const CompileReport& r);
CompileReport deserialize_report(const std::string& bytes);

/// A saved program read and checked (checksum, version, CPU) but not yet loaded.
struct Parsed {
  std::shared_ptr<detail::CallableState> state;  // graph, target, report, params
  std::shared_ptr<const compiler::KernelPlan> plan;
  std::string source_hash;
  std::string so;  // the shared object's bytes
};
/// Parses a saved program's bytes; `what` names it in errors. Throws RuntimeError.
Parsed parse(const std::string& bytes, const std::string& what);
/// Writes `bytes` to `path` through a unique temp file (O_EXCL, no link followed) and a
/// rename. Throws RuntimeError.
void write_atomically(const std::string& path, const std::string& bytes);

/// Recomputes the checksum trailer of a saved program's bytes (tests and fuzzers edit
/// fields behind the checksum with it). `bytes` must be at least a trailer long.
std::string reseal(std::string bytes);
/// The CPU features the code of a program compiled here needs: the host's instruction-set
/// flags (the JIT compiles with -march=native), sorted, space-separated.
std::string required_cpu_features();
/// Those of `recorded` (space-separated) this CPU lacks, space-separated ("" = none).
std::string missing_cpu_features(const std::string& recorded);

}  // namespace luminal::aot
