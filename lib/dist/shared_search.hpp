// One search for every rank of a tensor-parallel compile. Each rank used to run the
// search itself and the ranks compared plan fingerprints afterwards; the search is
// wall-clock budgeted, so on a busy machine two ranks could extract different plans and
// the compile was refused. Now rank 0 searches and sends the plan (with its report) to
// the others, so every rank runs the same plan by construction, and ranks 1..P-1 spend no
// time searching. Ranks first agree that they compile the same graph for the same target
// with the same search options; a rank that disagrees is named in a CompileError on every
// rank, and a search that fails on rank 0 fails every rank with its message (no rank is
// left waiting in a collective).
#pragma once

#include "compiler/compile_graph.hpp"
#include "graph/graph_impl.hpp"
#include "luminal/communicator.hpp"
#include "luminal/compile.hpp"
#include "luminal/target.hpp"

namespace luminal::dist {

/// compiler::compile_graph on rank 0, its result on every rank.
compiler::CompiledProgram search_once_for_all_ranks(Communicator& comm, const detail::GraphImpl& g,
                                                    const Target& target, const CompileOptions& options);

}  // namespace luminal::dist
