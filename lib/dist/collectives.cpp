#include "dist/collectives.hpp"

#include <cstring>
#include <string>

#include "backends/reference/collectives.hpp"
#include "graph/dim_expr.hpp"
#include "luminal/error.hpp"

namespace luminal::dist {

using detail::PrimOp;

namespace {

class HostLocalOps final : public LocalOps {
 public:
  std::byte* scratch(std::size_t bytes) override {
    if (buf_.size() < bytes) buf_.resize(bytes);
    return buf_.data();
  }
  void sum_in_rank_order(DType dt, const std::byte* blocks, std::size_t world, int64_t n,
                         std::byte* dst) override {
    const std::size_t bytes = static_cast<std::size_t>(n) * dtype_size(dt);
    std::vector<const std::byte*> b(world);
    for (std::size_t q = 0; q < world; ++q) b[q] = blocks + q * bytes;
    detail::reference::sum_in_rank_order(dt, b, n, dst);
  }
  void copy_rows(std::byte* dst, const std::byte* src, std::size_t row, std::size_t outer, std::size_t world,
                 std::size_t dq, std::size_t dout, std::size_t sq, std::size_t so) override {
    if (row == 0) return;
    for (std::size_t q = 0; q < world; ++q)
      for (std::size_t o = 0; o < outer; ++o) {
        if (src)
          std::memcpy(dst + q * dq + o * dout, src + q * sq + o * so, row);
        else
          std::memset(dst + q * dq + o * dout, 0, row);
      }
  }

 private:
  std::vector<std::byte> buf_;
};

// all_reduce as an all_to_all of blocks, the ordered sum of this rank's block, and an
// all_gather of the sums. Element i of the result is x(0)[i] + x(1)[i] + ... in rank order
// whichever rank adds it, so the result has the bits of the gather-then-sum form (and of
// the interpreter's), while a rank moves 2(P-1) blocks of ceil(n/P) elements instead of
// P-1 whole operands. When P does not divide n, the blocks are padded in scratch (the
// padding's sums are computed and dropped).
void all_reduce_scatter_gather(Communicator& comm, DType dt, int64_t numel, const void* in, void* out,
                               LocalOps& ops) {
  const auto world = static_cast<std::size_t>(comm.size());
  const std::size_t es = dtype_size(dt), n = static_cast<std::size_t>(numel);
  const std::size_t block = (n + world - 1) / world, padded = block * world;
  const std::size_t bytes = n * es, block_bytes = block * es, padded_bytes = padded * es;
  const bool exact = padded == n;
  // Scratch: the received blocks, this rank's sums, and (when padded) the packed operand
  // and the gathered sums.
  std::byte* tmp = ops.scratch(padded_bytes + block_bytes + (exact ? 0 : 2 * padded_bytes));
  std::byte* recv = tmp;
  std::byte* mine = recv + padded_bytes;
  const void* send = in;
  std::byte* gathered = static_cast<std::byte*>(out);
  if (!exact) {
    std::byte* packed = mine + block_bytes;
    gathered = packed + padded_bytes;
    ops.copy_rows(packed, static_cast<const std::byte*>(in), bytes, 1, 1, 0, 0, 0, 0);
    ops.copy_rows(packed + bytes, nullptr, padded_bytes - bytes, 1, 1, 0, 0, 0, 0);
    send = packed;
  }
  ops.before_communicator();
  comm.all_to_all(send, recv, block_bytes);
  ops.sum_in_rank_order(dt, recv, world, static_cast<int64_t>(block), mine);
  ops.before_communicator();
  comm.all_gather(mine, gathered, block_bytes);
  if (!exact) ops.copy_rows(static_cast<std::byte*>(out), gathered, bytes, 1, 1, 0, 0, 0, 0);
}

}  // namespace

LocalOps& host_local_ops() {
  thread_local HostLocalOps ops;
  return ops;
}

void run_collective(Communicator& comm, const ir::KernelSpec& spec, const std::vector<int64_t>& in_shape,
                    const void* in, void* out) {
  run_collective(comm, spec, in_shape, in, out, host_local_ops());
}

void run_collective(Communicator& comm, const ir::KernelSpec& spec, const std::vector<int64_t>& in_shape,
                    const void* in, void* out, LocalOps& ops) {
  const detail::Node& n = spec.body->nodes.at(spec.body->outputs.at(0).second);
  const auto world = static_cast<std::size_t>(comm.size());
  if (n.step != static_cast<int64_t>(world))
    throw RuntimeError("[" + std::string(detail::prim_name(n.op)) + "] the program was compiled for " +
                       std::to_string(n.step) + " ranks, the communicator has " + std::to_string(world));
  const std::size_t es = dtype_size(n.dtype);
  int64_t numel = 1;
  for (int64_t d : in_shape) numel *= d;
  const std::size_t bytes = static_cast<std::size_t>(numel) * es;
  const auto* src = static_cast<const std::byte*>(in);
  auto* dst = static_cast<std::byte*>(out);
  switch (n.op) {
    case PrimOp::AllGather: {
      int64_t outer = 1;
      for (int i = 0; i < n.axis; ++i) outer *= in_shape[static_cast<std::size_t>(i)];
      ops.before_communicator();
      if (outer == 1) {  // blocks are already in place
        comm.all_gather(in, out, bytes);
        return;
      }
      // Rank q's block gathered at tmp + q * bytes; its o-th row (the axis and below) goes
      // to row o * world + q of the result.
      std::byte* tmp = ops.scratch(world * bytes);
      comm.all_gather(in, tmp, bytes);
      const std::size_t row = bytes / static_cast<std::size_t>(outer);
      ops.copy_rows(dst, tmp, row, static_cast<std::size_t>(outer), world, row, world * row, bytes, row);
      return;
    }
    case PrimOp::AllReduce: {
      if (spec.launch.size() == 1 && spec.launch[0] == ir::kAllReduceScatterGather) {
        all_reduce_scatter_gather(comm, n.dtype, numel, in, out, ops);
        return;
      }
      std::byte* tmp = ops.scratch(world * bytes);
      ops.before_communicator();
      comm.all_gather(in, tmp, bytes);
      ops.sum_in_rank_order(n.dtype, tmp, world, numel, dst);
      return;
    }
    case PrimOp::ReduceScatter: {
      // Pack block q (rows q*d/P .. of the axis, for every outer index) contiguously, send
      // block q to rank q, add the blocks received in rank order.
      int64_t outer = 1, inner = 1;
      for (std::size_t i = 0; i < in_shape.size(); ++i) {
        if (static_cast<int>(i) < n.axis) outer *= in_shape[i];
        if (static_cast<int>(i) > n.axis) inner *= in_shape[i];
      }
      const int64_t d = in_shape.at(static_cast<std::size_t>(n.axis)), per = d / static_cast<int64_t>(world);
      const std::size_t row = static_cast<std::size_t>(per * inner) * es, block = bytes / world;
      std::byte* tmp = ops.scratch(2 * bytes);
      std::byte* packed = tmp;
      std::byte* recv = tmp + bytes;
      ops.copy_rows(packed, src, row, static_cast<std::size_t>(outer), world, block, row, row, world * row);
      ops.before_communicator();
      comm.all_to_all(packed, recv, block);
      ops.sum_in_rank_order(n.dtype, recv, world, static_cast<int64_t>(block / es), dst);
      return;
    }
    default:
      throw InternalError("[dist] run_collective given " + std::string(detail::prim_name(n.op)));
  }
}

Dim substitute(const Dim& d, const std::string& name, int64_t value) {
  const detail::DimExpr& e = *d.expr();
  Dim out(e.constant);
  for (const detail::Term& t : e.terms) {
    Dim term(t.coeff);
    for (const detail::AtomPtr& a : t.atoms) {
      Dim x;
      switch (a->kind) {
        case detail::AtomKind::Var:
          x = a->name == name ? Dim(value) : detail::atom_dim(a);
          break;
        case detail::AtomKind::Div:
          x = substitute(a->a, name, value) / substitute(a->b, name, value);
          break;
        case detail::AtomKind::Mod:
          x = substitute(a->a, name, value) % substitute(a->b, name, value);
          break;
        case detail::AtomKind::Min:
          x = min(substitute(a->a, name, value), substitute(a->b, name, value));
          break;
        case detail::AtomKind::Max:
          x = max(substitute(a->a, name, value), substitute(a->b, name, value));
          break;
      }
      term = term * x;
    }
    out = out + term;
  }
  return out;
}

uint64_t plan_fingerprint(const compiler::KernelPlan& plan) {
  // FNV-style mixing of 64-bit words; no std::hash of pointers anywhere below.
  uint64_t h = 0xcbf29ce484222325ull;
  auto mix = [&h](uint64_t v) { h = (h ^ v) * 0x100000001b3ull + (h >> 29); };
  auto mix_str = [&mix](const std::string& s) {
    mix(s.size());
    for (char c : s) mix(static_cast<unsigned char>(c));
  };
  mix(plan.leaf_name.size());
  for (size_t v = 0; v < plan.leaf_name.size(); ++v) {
    mix_str(plan.leaf_name[v]);
    mix(plan.leaf_is_param[v]);
  }
  mix(plan.steps.size());
  for (const auto& st : plan.steps) {
    mix(st.spec->hash);
    mix(st.args.size());
    for (uint32_t a : st.args) mix(a);
    mix(st.result);
  }
  for (const auto& [name, v] : plan.outputs) {
    mix_str(name);
    mix(v);
  }
  return h;
}

std::string ranks_differing_from_rank0(Communicator& comm, uint64_t mine) {
  const int P = comm.size();
  std::vector<uint64_t> all(static_cast<size_t>(P));
  comm.all_gather(&mine, all.data(), sizeof mine);
  std::string differ;
  for (int q = 1; q < P; ++q)
    if (all[static_cast<size_t>(q)] != all[0]) differ += (differ.empty() ? "" : ", ") + std::to_string(q);
  return differ;
}

void check_same_plan(Communicator& comm, const compiler::KernelPlan& plan) {
  const int P = comm.size();
  if (P <= 1) return;
  const std::string differ = ranks_differing_from_rank0(comm, plan_fingerprint(plan));
  if (!differ.empty())
    throw CompileError("[compile] rank " + std::to_string(comm.rank()) + " of " + std::to_string(P) + ": rank(s) " +
                       differ + " compiled a different plan than rank 0 (" + std::to_string(plan.steps.size()) +
                       " steps here): every rank must run the plan rank 0 searched");
}

std::shared_ptr<const compiler::KernelPlan> specialize_rank(const compiler::KernelPlan& plan, int rank, int world) {
  const std::string var(detail::kRankDim);
  auto p = std::make_shared<compiler::KernelPlan>(plan);
  for (auto& st : p->steps) {
    auto body = std::make_shared<detail::GraphImpl>(*st.spec->body);
    for (detail::Node& n : body->nodes) {
      if (detail::op_info(n.op).cls == detail::OpClass::Collective && n.step != world)
        throw CompileError("[compile] a collective over " + std::to_string(n.step) + " ranks in a program for " +
                           std::to_string(world));
      for (Dim& x : n.shape) x = substitute(x, var, rank);
      n.start = substitute(n.start, var, rank);
      n.end = substitute(n.end, var, rank);
    }
    auto spec = std::make_shared<ir::KernelSpec>(*st.spec);
    spec->body = std::move(body);
    spec->finalize();
    st.spec = std::move(spec);
  }
  return p;
}

}  // namespace luminal::dist
