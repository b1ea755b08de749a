// Grouped-query attention as one task per KV head: see group_heads.hpp.
#include "kernel/lower/group_heads.hpp"

#include <map>
#include <optional>

#include "kernel/lower/affine.hpp"

namespace luminal::kernel::lower {

namespace {

using VarMap = std::map<int, Index>;  // loop variable -> what replaces it

Index substitute(const Index& e, const VarMap& s) {
  const IndexNode& n = e.node();
  if (n.op == IndexOp::Const || n.op == IndexOp::Sym) return e;
  if (n.op == IndexOp::Var) {
    auto it = s.find(static_cast<int>(n.value));
    return it == s.end() ? e : it->second;
  }
  std::vector<Index> a;
  for (const Index& x : n.args) a.push_back(substitute(x, s));
  switch (n.op) {
    case IndexOp::Add: return a[0] + a[1];
    case IndexOp::Sub: return a[0] - a[1];
    case IndexOp::Mul: return a[0] * a[1];
    case IndexOp::FloorDiv: return floordiv(a[0], a[1]);
    case IndexOp::Mod: return mod(a[0], a[1]);
    case IndexOp::Min: return min(a[0], a[1]);
    case IndexOp::Max: return max(a[0], a[1]);
    case IndexOp::Lt: return lt(a[0], a[1]);
    case IndexOp::Le: return le(a[0], a[1]);
    case IndexOp::Eq: return eq(a[0], a[1]);
    case IndexOp::And: return land(a[0], a[1]);
    case IndexOp::Select: return select(a[0], a[1], a[2]);
    default: return e;  // leaves, handled above
  }
}

// Every index of an expression rewritten by `f` (loads, pad validity, index values).
template <class F>
Expr map_indices(const Expr& e, const F& f) {
  if (!e.valid()) return e;
  const ExprNode& n = e.node();
  std::vector<Expr> a;
  for (const Expr& x : n.args) a.push_back(map_indices(x, f));
  switch (n.op) {
    case ExprOp::Const:
    case ExprOp::Acc:
      return e;
    case ExprOp::Load:
      return n.valid ? load_padded(n.buffer, n.dtype, f(n.index), f(*n.valid), n.fill)
                     : load(n.buffer, n.dtype, f(n.index));
    case ExprOp::IndexValue:
      return index_value(f(n.index));
    case ExprOp::Unary:
      return unary(n.unary, a[0]);
    case ExprOp::Binary:
      return binary(n.binary, a[0], a[1]);
    case ExprOp::Where:
      return where(a[0], a[1], a[2]);
    case ExprOp::Cast:
      return cast(a[0], n.dtype);
  }
  return e;
}

bool is_zero(const Index& i) { return i.as_constant() == int64_t{0}; }

}  // namespace

bool group_query_heads(Kernel& k, const VarExtents& extents, const SymbolMins& sym_min, int fresh_var) {
  if (k.kind != KernelKind::Attention || !k.attention) return false;
  const Attention& a = *k.attention;
  const std::optional<int64_t> m = a.m.as_constant();
  if (!m || *m < 1) return false;
  const int rv = fresh_var;
  for (size_t li = 0; li < k.loops.size(); ++li) {
    const int b = k.loops[li].var;
    const std::optional<int64_t> h = k.loops[li].extent.as_constant();
    if (!h || *h < 2) continue;
    for (int64_t g = std::min<int64_t>(*h, kMaxGroupedRows / *m); g >= 2; --g) {
      if (*h % g != 0) continue;
      // K and V must read head b only through b / g: with b = g * b' + r for r in [0, g)
      // they are free of r, and equal their value at r = 0 (b = g * b').
      VarExtents probe = extents;
      probe[b] = Index(*h / g);
      probe[rv] = Index(g);
      const VarMap split{{b, Index(g) * Index::var(b) + Index::var(rv)}};
      const VarMap head0{{b, Index(g) * Index::var(b)}};
      auto simp = [&](const Index& i) { return simplify(i, probe, sym_min); };
      bool shared = true;
      auto at_head0 = [&](const Index& i) {
        if (uses_var(simp(substitute(i, split)), rv)) shared = false;
        return simp(substitute(i, head0));
      };
      Attention out = a;
      out.k = map_indices(a.k, at_head0);
      for (KeyExprSegment& sg : out.k_more) {
        sg.k = map_indices(sg.k, at_head0);
        sg.j0 = at_head0(sg.j0);
      }
      auto view_at_head0 = [&](MatrixView& v) {
        v.offset = at_head0(v.offset);
        v.row_stride = at_head0(v.row_stride);
        v.col_stride = at_head0(v.col_stride);
      };
      view_at_head0(out.v);
      for (KeySegment& sg : out.v_more) {
        view_at_head0(sg.v);
        sg.j0 = at_head0(sg.j0);
      }
      if (!shared) continue;
      // The output: row r of the group at off(head g * b') + r * stride', which needs
      // off affine in b with slope c, and (m > 1) the heads' rows contiguous: c = m * rs.
      const Index off0 = simp(substitute(a.out.offset, head0));
      const Index c = simp(substitute(a.out.offset, {{b, Index(1)}}) - substitute(a.out.offset, {{b, Index(0)}}));
      if (uses_var(c, b) || uses_var(c, rv)) continue;
      if (!is_zero(simp(substitute(a.out.offset, split) - off0 - Index::var(rv) * c))) continue;
      if (*m > 1 && !is_zero(simp(c - Index(*m) * a.out.row_stride))) continue;
      out.out.offset = off0;
      out.out.row_stride = *m == 1 ? c : a.out.row_stride;
      // What reads the query row or head: row r is query r % m of head g * b' + r / m.
      probe[rv] = Index(g * *m);
      const VarMap rows{{b, Index(g) * Index::var(b) + floordiv(Index::var(rv), Index(*m))},
                        {a.row_var, mod(Index::var(rv), Index(*m))}};
      auto at_row = [&](const Index& i) { return simp(substitute(i, rows)); };
      out.q = map_indices(a.q, at_row);
      out.score = map_indices(a.score, at_row);
      out.epilogue = map_indices(a.epilogue, at_row);
      if (a.key_end) out.key_end = at_row(*a.key_end);
      out.row_var = rv;
      out.m = Index(g * *m);
      k.attention = std::move(out);
      k.loops[li].extent = Index(*h / g);
      return true;
    }
  }
  return false;
}

}  // namespace luminal::kernel::lower
