// Patterns (runtime form), their compilation to a flat e-matching program, and the
// machine that runs it.
//
// A pattern is a tree of op nodes and variables stored in post-order (children before
// parents, root last). Both front ends produce it: the C++ expression templates
// (pattern_dsl.hpp) and the s-expression parser (sexpr.hpp).
//
// The e-matching program is a list of instructions over registers holding class ids:
//   Scan op -> r        r := every class that holds a node with `op` (a root)
//   Bind r, op -> r'..  for every node of class r with `op` (and payload, if given):
//                       r'.. := its children
//   Compare r1, r2      continue only if r1 == r2 (a repeated variable)
//   Yield               report the registers that hold the variables
// Matching runs on the rebuilt e-graph's ClassIndex, where every child id is canonical,
// so the machine never calls find. Several roots (a multi-pattern) are several Scans in
// one program; shared variables become Compares, which is a nested-loop join.
#pragma once

#include <array>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "luminal/egraph/egraph.hpp"
#include "luminal/egraph/language.hpp"

namespace luminal::egraph {

/// Largest number of distinct variables in one rule (variables are numbered 0..63).
inline constexpr int kMaxVars = 64;

/// A pattern in runtime form: post-order nodes, the root last.
template <Language L>
struct Pattern {
  /// One pattern node: a variable (`var` >= 0) or an op node with children.
  struct Node {
    int var = -1;                   ///< variable number, or -1 for an op node
    typename L::Op op{};            ///< op of an op node
    typename L::Payload payload{};  ///< payload an op node must have (if check_payload)
    bool check_payload = false;     ///< whether the payload is part of the pattern
    std::uint32_t kid_begin = 0;    ///< first child in `kids`
    std::uint32_t nkids = 0;        ///< number of children
  };
  std::vector<Node> nodes;                        ///< post-order, root last
  std::vector<std::uint32_t> kids;                ///< child node indices, per node contiguous
  std::array<std::string, kMaxVars> var_names{};  ///< names for printing/parsing (may be empty)

  /// Bit i set when variable i occurs.
  std::uint64_t vars() const noexcept {
    std::uint64_t m = 0;
    for (const Node& n : nodes)
      if (n.var >= 0) m |= std::uint64_t{1} << n.var;
    return m;
  }
  /// Index of the root node.
  std::uint32_t root() const noexcept { return static_cast<std::uint32_t>(nodes.size() - 1); }
};

/// Maps variable numbers (and roots) to positions in a match's register row.
struct VarTable {
  std::array<std::int16_t, kMaxVars> slot;  ///< var -> position in a match row, -1 if unbound
  std::array<std::string, kMaxVars> names{};
  std::vector<std::uint16_t> roots;  ///< positions of the root classes
  std::uint32_t width = 0;           ///< row width
  VarTable() { slot.fill(-1); }
};

/// One match: the root class(es) and the classes bound to each variable.
class Match {
 public:
  Match(const Id* row, const VarTable* vt) noexcept : row_(row), vt_(vt) {}
  /// The class matched by root `i` (0 for a single pattern).
  Id root(std::size_t i = 0) const noexcept { return row_[vt_->roots[i]]; }
  /// The class bound to variable number `v`.
  Id var(int v) const noexcept { return row_[vt_->slot[static_cast<std::size_t>(v)]]; }
  /// The class bound to the variable named `name` (as written in an s-expression, "?a").
  Id var(std::string_view name) const {
    for (int v = 0; v < kMaxVars; ++v)
      if (vt_->slot[static_cast<std::size_t>(v)] >= 0 && vt_->names[static_cast<std::size_t>(v)] == name)
        return var(v);
    return kNoId;
  }
  /// The class bound to a DSL variable: `m[a]`.
  template <class V>
  requires requires { V::id; }
  Id operator[](V) const noexcept { return var(V::id); }
  /// Raw register row (width = table width).
  const Id* row() const noexcept { return row_; }

 private:
  const Id* row_;
  const VarTable* vt_;
};

/// A compiled e-matching program (see the file comment).
template <Language L>
struct Program {
  enum class Kind : std::uint8_t { Scan, ScanAll, Bind, Compare, Yield };
  struct Inst {
    Kind kind;
    typename L::Op op{};
    bool check_payload = false;
    std::uint32_t arity = 0;
    std::uint32_t in = 0;       // Bind: class register; Compare: first register
    std::uint32_t out = 0;      // Bind/Scan: first output register; Compare: second register
    std::uint32_t payload = 0;  // index into payloads
  };
  std::vector<Inst> insts;
  std::vector<typename L::Payload> payloads;
  std::uint32_t nregs = 0;
  std::vector<std::uint32_t> keep;  // registers copied into a stored match row: roots, then variables
  VarTable vars;                    // positions in a stored match row

  /// Compiles one or more patterns (roots share variables) into a program.
  static Program compile(const std::vector<const Pattern<L>*>& pats) {
    Program p;
    std::array<std::int32_t, kMaxVars> var_reg;
    var_reg.fill(-1);
    for (const Pattern<L>* pat : pats) {
      std::uint32_t r = p.nregs++;
      p.vars.roots.push_back(static_cast<std::uint16_t>(r));
      const auto& root = pat->nodes[pat->root()];
      if (root.var >= 0) {
        p.insts.push_back(Inst{Kind::ScanAll, {}, false, 0, 0, r, 0});
      } else {
        p.insts.push_back(Inst{Kind::Scan, root.op, false, 0, 0, r, 0});
      }
      p.emit(*pat, pat->root(), r, var_reg);
      for (int v = 0; v < kMaxVars; ++v)
        if (!pat->var_names[static_cast<std::size_t>(v)].empty())
          p.vars.names[static_cast<std::size_t>(v)] = pat->var_names[static_cast<std::size_t>(v)];
    }
    p.insts.push_back(Inst{Kind::Yield});
    // A stored match keeps only the roots and the variables, not intermediate registers.
    std::vector<std::uint16_t> root_regs = p.vars.roots;
    p.vars.roots.clear();
    for (std::uint16_t r : root_regs) {
      p.vars.roots.push_back(static_cast<std::uint16_t>(p.keep.size()));
      p.keep.push_back(r);
    }
    for (int v = 0; v < kMaxVars; ++v)
      if (var_reg[static_cast<std::size_t>(v)] >= 0) {
        p.vars.slot[static_cast<std::size_t>(v)] = static_cast<std::int16_t>(p.keep.size());
        p.keep.push_back(static_cast<std::uint32_t>(var_reg[static_cast<std::size_t>(v)]));
      }
    p.vars.width = static_cast<std::uint32_t>(p.keep.size());
    return p;
  }

 private:
  // Emits the instructions that check pattern node `i`, whose class is in register r.
  // Children are visited variables first, then leaves, then deeper nodes, so cheap
  // checks (repeated variables, constants) prune before the expensive loops.
  void emit(const Pattern<L>& pat, std::uint32_t i, std::uint32_t r,
            std::array<std::int32_t, kMaxVars>& var_reg) {
    const auto& n = pat.nodes[i];
    if (n.var >= 0) {
      auto& vr = var_reg[static_cast<std::size_t>(n.var)];
      if (vr < 0) {
        vr = static_cast<std::int32_t>(r);
      } else {
        insts.push_back(Inst{Kind::Compare, {}, false, 0, static_cast<std::uint32_t>(vr), r, 0});
      }
      return;
    }
    std::uint32_t out = nregs;
    nregs += n.nkids;
    Inst b{Kind::Bind, n.op, n.check_payload, n.nkids, r, out, 0};
    if (n.check_payload) {
      b.payload = static_cast<std::uint32_t>(payloads.size());
      payloads.push_back(n.payload);
    }
    insts.push_back(b);
    for (int pass = 0; pass < 3; ++pass) {
      for (std::uint32_t k = 0; k < n.nkids; ++k) {
        const auto& c = pat.nodes[pat.kids[n.kid_begin + k]];
        int kind = c.var >= 0 ? 0 : (c.nkids == 0 ? 1 : 2);
        if (kind == pass) emit(pat, pat.kids[n.kid_begin + k], out + k, var_reg);
      }
    }
  }
};

/// Runs a program on a rebuilt e-graph's index; calls `yield(const Id* regs, bool fresh)`
/// per match. Stops early (returns false) when `yield` returns false.
///
/// `fresh` (semi-naive matching): whether the match binds a node stamped `since` or later
/// (ClassIndex::entry_stamp). A match that is not fresh was already there, binding the
/// same nodes to the same classes, when the e-graph was at epoch `since`: a node whose
/// children changed is re-stamped, and so is a node that moved into another class; a
/// parent of the class it left is re-canonicalized, so re-stamped too. A caller that
/// applied every match of that search may skip it. With `since` = 0 every match is fresh.
template <Language L, class A, class Yield>
class Machine {
 public:
  Machine(const EGraph<L, A>& g, const ClassIndex<L>& ix, const Program<L>& p, Yield& y, std::uint32_t since = 0)
      : g_(g), ix_(ix), p_(p), y_(y), regs_(p.nregs), since_(since) {}

  /// Runs the whole program (all roots). Returns false if stopped early.
  bool run() { return step(0, since_ == 0); }

  /// Runs with root register 0 preset to `cls` (skipping the first Scan).
  bool run_from(Id cls) {
    regs_[0] = cls;
    return step(1, since_ == 0);
  }

 private:
  using Kind = typename Program<L>::Kind;

  bool step(std::size_t pc, bool fresh) {
    const auto& in = p_.insts[pc];
    switch (in.kind) {
      case Kind::Scan:
        for (Id c : ix_.classes_with(in.op)) {
          regs_[in.out] = c;
          if (!step(pc + 1, fresh)) return false;
        }
        return true;
      case Kind::ScanAll:
        for (Id c : ix_.classes()) {
          regs_[in.out] = c;
          if (!step(pc + 1, fresh)) return false;
        }
        return true;
      case Kind::Bind: {
        auto [b, e] = ix_.entries(regs_[in.in], in.op);
        for (std::uint32_t j = b; j < e; ++j) {
          if (in.check_payload && !(ix_.entry_payload(j) == p_.payloads[in.payload])) continue;
          std::span<const Id> kids = ix_.entry_kids(j);
          if (kids.size() != in.arity) continue;
          Id* out = regs_.data() + in.out;
          switch (in.arity) {  // the common arities without a loop
            case 0:
              break;
            case 1:
              out[0] = kids[0];
              break;
            case 2:
              out[0] = kids[0];
              out[1] = kids[1];
              break;
            default:
              for (std::uint32_t k = 0; k < in.arity; ++k) out[k] = kids[k];
          }
          if (!step(pc + 1, fresh || ix_.entry_stamp(j) >= since_)) return false;
        }
        return true;
      }
      case Kind::Compare:
        if (regs_[in.in] != regs_[in.out]) return true;
        return step(pc + 1, fresh);
      case Kind::Yield:
        return y_(static_cast<const Id*>(regs_.data()), fresh);
    }
    return true;
  }

  const EGraph<L, A>& g_;
  const ClassIndex<L>& ix_;
  const Program<L>& p_;
  Yield& y_;
  std::vector<Id> regs_;
  std::uint32_t since_;
};

}  // namespace luminal::egraph
