// Kernel read/write sets and the waits between kernels (see the header).
#include "backends/cpu/kernel_deps.hpp"

#include <algorithm>

namespace luminal::cpu {

namespace {

void loads(const kernel::Expr& e, std::vector<int>& out) {
  if (!e.valid()) return;
  if (e.op() == kernel::ExprOp::Load) out.push_back(e.node().buffer);
  for (const auto& a : e.node().args) loads(a, out);
}

bool overlap(const BufferSpan& a, const BufferSpan& b) {
  return a.arena == b.arena && a.lo < b.hi && b.lo < a.hi;
}

}  // namespace

std::vector<KernelAccess> kernel_accesses(const kernel::Program& prog) {
  std::vector<KernelAccess> out;
  for (const auto& k : prog.kernels) {
    KernelAccess a;
    if (k.gemm) {
      a.reads = {k.gemm->b.buffer};
      if (k.gemm->a_prologue) {
        loads(k.gemm->a_prologue->stat.value, a.reads);
        loads(k.gemm->a_prologue->a, a.reads);
      } else {
        a.reads.push_back(k.gemm->a.buffer);
      }
      for (const kernel::GemmSegment& sg : k.gemm->b_segments) a.reads.push_back(sg.b.buffer);
      loads(k.gemm->epilogue, a.reads);
      a.writes = {k.gemm->c.buffer};
    } else if (k.attention) {
      const kernel::Attention& at = *k.attention;
      a.reads = {at.v.buffer};
      for (const kernel::KeySegment& sg : at.v_more) a.reads.push_back(sg.v.buffer);
      loads(at.q, a.reads);
      loads(at.k, a.reads);
      for (const kernel::KeyExprSegment& sg : at.k_more) loads(sg.k, a.reads);
      loads(at.score, a.reads);
      loads(at.epilogue, a.reads);
      a.writes = {at.out.buffer};
    } else if (k.gather) {
      a.reads = {k.gather->table, k.gather->ids};
      a.writes = {k.gather->out};
    } else if (k.kind == kernel::KernelKind::Elementwise || k.kind == kernel::KernelKind::Reduction) {
      loads(k.store.value, a.reads);
      if (k.reduce) loads(k.reduce->value, a.reads);
      a.writes = {k.store.buffer};
    } else {
      a.opaque = true;  // a kind this file does not know: waits before and after
    }
    std::sort(a.reads.begin(), a.reads.end());
    a.reads.erase(std::unique(a.reads.begin(), a.reads.end()), a.reads.end());
    out.push_back(std::move(a));
  }
  return out;
}

std::vector<uint8_t> wait_before(const std::vector<KernelAccess>& access,
                                 const std::vector<BufferSpan>& span) {
  std::vector<uint8_t> wait(access.size(), 0);
  std::vector<BufferSpan> read, written;  // by kernels issued since the last wait
  auto hits = [&](int b, const std::vector<BufferSpan>& set) {
    const BufferSpan& s = span[static_cast<size_t>(b)];
    if (s.lo == s.hi) return false;  // empty
    for (const auto& x : set)
      if (overlap(s, x)) return true;
    return false;
  };
  for (size_t k = 0; k < access.size(); ++k) {
    bool w = access[k].opaque || (k > 0 && access[k - 1].opaque);
    for (int b : access[k].reads) w = w || hits(b, written);
    for (int b : access[k].writes) w = w || hits(b, written) || hits(b, read);
    if (w) {
      wait[k] = 1;
      read.clear();
      written.clear();
    }
    for (int b : access[k].reads) read.push_back(span[static_cast<size_t>(b)]);
    for (int b : access[k].writes) written.push_back(span[static_cast<size_t>(b)]);
  }
  return wait;
}

}  // namespace luminal::cpu
