// What a guided pass (RuleInfo::guided) acts on: the kernels of the program an extraction
// chose, and the wider products its classes are slices of. The search computes it for each
// guided round (compiler/search.cpp); the rule checker computes it for the program it
// extracts from an example, so the passes are checked in the mode the search runs them.
#pragma once

#include <cstdint>
#include <vector>

#include "ir/tensor_lang.hpp"

namespace luminal::rules {

enum class Walk { Descend, Skip, Stop };

/// Walks the classes an extraction's `choice` reaches from `roots`, each once, by canonical
/// id: `visit(cls)` says whether to walk on into the kids of the class's chosen node, to
/// skip them, or to stop the whole walk (then false is returned).
template <class Visit>
bool walk_choice(ir::EGraph& g, const std::vector<ir::Id>& roots, const std::vector<ir::Id>& choice,
                 Visit visit) {
  std::vector<ir::Id> stack;
  for (ir::Id r : roots) stack.push_back(g.find(r));
  std::vector<uint8_t> seen(g.num_node_ids(), 0);
  while (!stack.empty()) {
    const ir::Id c = stack.back();
    stack.pop_back();
    if (c < seen.size()) {
      if (seen[c]) continue;
      seen[c] = 1;
    }
    const Walk w = visit(c);
    if (w == Walk::Stop) return false;
    if (w == Walk::Skip) continue;
    for (ir::Id k : g.node(choice[c]).kids) stack.push_back(g.find(k));
  }
  return true;
}

/// PassContext::focus and PassContext::wider for a program.
struct GuidedFocus {
  /// The program's kernel nodes (its leaves below them are not kernels).
  std::vector<ir::Id> focus;
  /// For each class of the program that is also a slice of a wider class the program does
  /// not compute -- the widest such, a product merged with its siblings -- that class's
  /// kernel node with the smallest body (launch twins and library calls aside).
  std::vector<ir::Id> wider;
  /// Those of `wider` that the program's classes reach only through an elementwise
  /// function of slices (SwiGLU of the merged gate|up product, computed inside one row
  /// kernel of both products): the program computes no slice of them alone.
  std::vector<ir::Id> wider_through_elementwise;
};

/// The guided passes' focus for the program `choice` reaches from `roots`.
GuidedFocus guided_focus(ir::EGraph& g, const std::vector<ir::Id>& roots, const std::vector<ir::Id>& choice);

}  // namespace luminal::rules
