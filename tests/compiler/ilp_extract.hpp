// Exact DAG extraction as an integer linear program (as egg's LpExtractor and Tensat
// formulate it): the yardstick the heuristic DagExtractor is measured against. GLPK
// builds the model (and solves it when COIN-OR CBC's `cbc` program is absent); CBC
// solves it. Test-only: GLPK is linked into this test binary, never into the library.
//
//   minimise   sum_n cost(n) x_n
//   subject to sum_{n in c} x_n = a_c            every class: one node if active
//              x_n <= a_k                        a chosen node's children are active
//              a_r = 1                           the roots
//              t_c - t_k >= 1 - M (1 - x_n)      n in c reads k: an order exists (acyclic)
//   x, a binary; t continuous in [0, M - 1], M = number of classes. The order rows are
//   written only for edges inside a strongly connected component of the class graph
//   (elsewhere no cycle is possible), which keeps the relaxation tight.
//
// Nodes of infinite cost are left out; of nodes with the same children in one class only
// the cheapest is kept (GEMM tile variants), which cannot change the optimum.
#pragma once

#include <cstdint>
#include <vector>

#include "compiler/search.hpp"

namespace luminal::test {

struct IlpResult {
  bool solved = false;   ///< GLPK found a feasible integer solution
  bool optimal = false;  ///< ... and proved it optimal within the time limit
  double cost = 0;       ///< its DAG cost
  std::vector<egraph::Id> choice;  ///< node per class (kNoId where inactive)
  int columns = 0, rows = 0;
  double seconds = 0;
  const char* solver = "";  ///< "cbc" or "glpk"
};

/// `start` (optional): a known solution (node per class, e.g. the heuristic's), given to
/// the solver as its first incumbent.
IlpResult ilp_extract(ir::EGraph& g, const compiler::KernelCost& cost, const std::vector<egraph::Id>& roots,
                      double time_limit_s, const std::vector<egraph::Id>& start = {});

}  // namespace luminal::test
