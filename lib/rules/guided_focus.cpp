#include "rules/guided_focus.hpp"

#include <algorithm>
#include <optional>
#include <unordered_set>
#include <utility>

#include "ir/kernel_body.hpp"

namespace luminal::rules {

// The wider kernels are the consumers absorb-producers fuses the program's producers into
// besides the program's own: one per class (four made the sm_90 e-graphs up to 60% larger
// and found nothing more).
GuidedFocus guided_focus(ir::EGraph& g, const std::vector<ir::Id>& roots, const std::vector<ir::Id>& choice) {
  GuidedFocus out;
  // The program's classes, and its kernels (its leaves below them are not kernels).
  std::vector<ir::Id> program;
  walk_choice(g, roots, choice, [&](ir::Id c) {
    if (c >= choice.size() || choice[c] == egraph::kNoId) return Walk::Skip;
    program.push_back(c);
    if (g.node(choice[c]).op != ir::Op::Kernel) return Walk::Skip;
    out.focus.push_back(choice[c]);
    return Walk::Descend;
  });
  const std::unordered_set<ir::Id> in_program(program.begin(), program.end());
  const auto& ix = g.index();
  std::unordered_set<ir::Id> widest;
  for (ir::Id c : program) {
    if (g.node(choice[c]).op != ir::Op::Kernel) continue;
    // The class and those it is a view or a cast of, a few steps down (the program's
    // kernel may compute cast(reshape(slice(..))) as a whole: a decode step's f16 K row).
    std::vector<ir::Id> under{c};
    for (std::size_t i = 0; i < under.size() && under.size() < 16; ++i)
      for (ir::Id nd : ix.nodes(under[i])) {
        const ir::Op op = g.node(nd).op;
        if ((!ir::is_view(op) && op != ir::Op::Cast) || op == ir::Op::Slice) continue;
        const ir::Id k = g.find(g.node(nd).kids[0]);
        if (std::find(under.begin(), under.end(), k) == under.end()) under.push_back(k);
      }
    double best = 0;
    std::vector<ir::Id> at_best;
    for (ir::Id u : under)
      for (ir::Id nd : ix.nodes(u, ir::Op::Slice)) {
        const ir::Id src = g.find(g.node(nd).kids[0]);
        if (in_program.count(src)) continue;
        const double n = ir::guessed_numel(g.data(src).shape, {});
        if (n > best) {
          at_best.clear();
          best = n;
        }
        if (n == best) at_best.push_back(src);
      }
    widest.insert(at_best.begin(), at_best.end());
  }
  for (ir::Id w : widest) {
    // (what absorbs a producer gets its launches from the schedule rules that follow; a
    // library call absorbs none)
    std::optional<std::pair<std::size_t, ir::Id>> smallest;
    for (ir::Id nd : ix.nodes(w, ir::Op::Kernel)) {
      const ir::KernelSpec& spec = *g.analysis().attrs().get(g.node(nd).payload).kernel;
      if (spec.launch.empty() && spec.kind != ir::KernelKind::LibraryGemm)
        smallest = std::min(smallest.value_or(std::pair{spec.body->nodes.size(), nd}),
                            std::pair{spec.body->nodes.size(), nd});
    }
    if (smallest) out.wider.push_back(smallest->second);
  }
  std::sort(out.wider.begin(), out.wider.end());
  return out;
}

}  // namespace luminal::rules
