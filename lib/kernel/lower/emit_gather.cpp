// The Gather kind: recognize_gather's plan (a bare gather) -> row copies.
#include "kernel/lower/lowerer.hpp"

namespace luminal::kernel::lower {

// A bare gather (the only body a Gather kernel has): row copies, ids checked by the
// host before the call.
void Lowerer::emit_gather(const GatherBody& m, int result) {
  const Node& n = body_.nodes[m.gather];
  const uint32_t table = m.table, ids = m.ids;
  kernel::Gather g;
  g.table = slot_buffer(body_.nodes[table]);
  g.ids = slot_buffer(body_.nodes[ids]);
  g.out = result;
  g.count = Index(1);
  for (const Index& d : shapes_[ids]) g.count = g.count * d;
  const auto& ts = shapes_[table];
  if (ts.empty()) return void(unsupported("gather from a rank-0 table", n.dtype));
  if (stopped()) return;
  if (prog_.block(g.table))
    return void(unsupported("gather from a table stored as a block", n.dtype));  // rows are whole
  g.rows = ts[0];
  g.row = Index(1);
  for (size_t i = 1; i < ts.size(); ++i) g.row = g.row * ts[i];
  if (!n.op_name.empty()) g.op_name = n.op_name;
  kernel::Kernel k;
  k.name = kernel_name();
  k.kind = kernel::KernelKind::Gather;
  k.gather = std::move(g);
  kernels.push_back(std::move(k));
}

}  // namespace luminal::kernel::lower
