#include "kernel/buffer_access.hpp"

namespace luminal::kernel {

namespace {

void loads(const Expr& e, std::vector<int>& out) {
  if (!e.valid()) return;
  if (e.op() == ExprOp::Load) out.push_back(e.node().buffer);
  for (const auto& a : e.node().args) loads(a, out);
}

}  // namespace

BufferAccess buffer_access(const Kernel& k) {
  BufferAccess a;
  switch (k.kind) {
    case KernelKind::Elementwise:
    case KernelKind::Reduction:
      loads(k.store.value, a.reads);
      if (k.reduce) {
        loads(k.reduce->value, a.reads);
        for (const Accumulator& m : k.reduce->more) loads(m.value, a.reads);
      }
      a.writes = {k.store.buffer};
      break;
    case KernelKind::Gemm: {
      const Gemm& g = *k.gemm;
      if (g.a_prologue) {
        loads(g.a_prologue->stat.value, a.reads);
        loads(g.a_prologue->a, a.reads);
      } else {
        a.reads.push_back(g.a.buffer);
      }
      a.reads.push_back(g.b.buffer);
      for (const GemmSegment& sg : g.b_segments) a.reads.push_back(sg.b.buffer);
      loads(g.epilogue, a.reads);
      a.writes = {g.c.buffer};
      break;
    }
    case KernelKind::Gather:
      a.reads = {k.gather->table, k.gather->ids};
      a.writes = {k.gather->out};
      break;
    case KernelKind::Attention: {
      const Attention& at = *k.attention;
      a.reads = {at.v.buffer};
      for (const KeySegment& sg : at.v_more) a.reads.push_back(sg.v.buffer);
      loads(at.q, a.reads);
      loads(at.k, a.reads);
      for (const KeyExprSegment& sg : at.k_more) loads(sg.k, a.reads);
      loads(at.score, a.reads);
      loads(at.epilogue, a.reads);
      a.writes = {at.out.buffer};
      if (at.split) {  // the ranges' states, the counts, and the last range blocks write out
        a.writes.push_back(at.split->partial);
        a.reads.push_back(at.split->counter);
        a.writes.push_back(at.split->counter);
      }
      break;
    }
  }
  for (const auto* list : {&k.side, &k.tail})  // run by the same launch
    for (const Kernel& w : *list) {
      const BufferAccess b = buffer_access(w);
      a.reads.insert(a.reads.end(), b.reads.begin(), b.reads.end());
      a.writes.insert(a.writes.end(), b.writes.begin(), b.writes.end());
    }
  if (k.tail_counter >= 0) {  // every block counts itself; the last sets it back to zero
    a.reads.push_back(k.tail_counter);
    a.writes.push_back(k.tail_counter);
  }
  return a;
}

}  // namespace luminal::kernel
