// E-class analyses: a value per e-class, computed from its nodes and joined on merges.
//
// An analysis `A` provides
//   using Data = ...;                                  // any movable struct
//   Data make(const EGraph<L, A>& g, NodeView<L> n);   // data of a single node
//   DidMerge merge(Data& a, Data b);                   // a := join(a, b)
// and optionally
//   void modify(EGraph<L, A>& g, Id cls);              // e.g. add a constant and union
// `merge` must be a join (commutative, associative, idempotent) so the result does not
// depend on the order in which classes merge. It reports which side changed, so the
// engine re-runs `make` on the parents of a class only when its data actually changed.
#pragma once

namespace luminal::egraph {

/// What a join changed: `a` — the result differs from the old left side; `b` — it differs
/// from the right side.
struct DidMerge {
  bool a = false;
  bool b = false;
};

/// The empty analysis: no data per class, no cost.
struct NoAnalysis {
  struct Data {};
  template <class G, class N>
  Data make(const G&, const N&) const noexcept {
    return {};
  }
  DidMerge merge(Data&, Data) const noexcept { return {}; }
};

}  // namespace luminal::egraph
