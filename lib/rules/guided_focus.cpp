#include "rules/guided_focus.hpp"

#include <algorithm>
#include <optional>
#include <unordered_map>
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
  std::unordered_map<ir::Id, bool> widest;  // wider class -> reached only through elementwise operations
  for (ir::Id c : program) {
    if (g.node(choice[c]).op != ir::Op::Kernel) continue;
    // The class and those it is a view, a cast or an elementwise function of, a few steps
    // down (the program's kernel may compute cast(reshape(slice(..))) as a whole: a
    // decode step's f16 K row; or SwiGLU, silu(gate) * up, with gate and up inside: gate
    // and up are slices of the merged gate|up product), each with whether an elementwise
    // operation lies on the way.
    std::vector<std::pair<ir::Id, bool>> under{{c, false}};
    auto seen = [&](ir::Id k) {
      return std::find_if(under.begin(), under.end(), [&](const auto& u) { return u.first == k; }) !=
             under.end();
    };
    for (std::size_t i = 0; i < under.size() && under.size() < 16; ++i)
      for (ir::Id nd : ix.nodes(under[i].first)) {
        const ir::Op op = g.node(nd).op;
        const bool view = ir::is_view(op) || op == ir::Op::Cast;
        if ((!view && !ir::is_elementwise(op)) || op == ir::Op::Slice) continue;
        const auto kids = g.node(nd).kids;
        for (std::size_t j = 0; j < (view ? std::min<std::size_t>(kids.size(), 1) : kids.size()); ++j) {
          const ir::Id k = g.find(kids[j]);
          // (an operand another kernel of the program computes is read, not computed here)
          if ((view || !in_program.count(k)) && !seen(k)) under.emplace_back(k, under[i].second || !view);
        }
      }
    double best = 0;
    std::vector<std::pair<ir::Id, bool>> at_best;
    for (const auto& [u, through_elementwise] : under)
      for (ir::Id nd : ix.nodes(u, ir::Op::Slice)) {
        const ir::Id src = g.find(g.node(nd).kids[0]);
        if (in_program.count(src)) continue;
        const double n = ir::guessed_numel(g.data(src).shape, {});
        if (n > best) {
          at_best.clear();
          best = n;
        }
        if (n == best) at_best.emplace_back(src, through_elementwise);
      }
    for (const auto& [src, through_elementwise] : at_best) {
      auto [it, fresh] = widest.try_emplace(src, through_elementwise);
      if (!fresh) it->second = it->second && through_elementwise;
    }
  }
  for (const auto& [w, through_elementwise] : widest) {
    // (what absorbs a producer gets its launches from the schedule rules that follow; a
    // library call absorbs none)
    std::optional<std::pair<std::size_t, ir::Id>> smallest;
    for (ir::Id nd : ix.nodes(w, ir::Op::Kernel)) {
      const ir::KernelSpec& spec = *g.analysis().attrs().get(g.node(nd).payload).kernel;
      if (spec.launch.empty() && spec.kind != ir::KernelKind::LibraryGemm)
        smallest = std::min(smallest.value_or(std::pair{spec.body->nodes.size(), nd}),
                            std::pair{spec.body->nodes.size(), nd});
    }
    if (!smallest) continue;
    out.wider.push_back(smallest->second);
    if (through_elementwise) out.wider_through_elementwise.push_back(smallest->second);
  }
  std::sort(out.wider.begin(), out.wider.end());
  std::sort(out.wider_through_elementwise.begin(), out.wider_through_elementwise.end());
  return out;
}

}  // namespace luminal::rules
