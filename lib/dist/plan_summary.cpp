#include "dist/plan_summary.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>

#include "graph/dim_vars.hpp"

namespace luminal::dist {

namespace {

bool reads_shard(const detail::GraphImpl& body) {
  for (const detail::Node& n : body.nodes) {
    if (n.op != detail::PrimOp::Slice) continue;
    std::map<std::string, detail::VarRange> vars;
    detail::collect_vars(n.start, vars);
    if (vars.count(std::string(detail::kRankDim))) return true;
  }
  return false;
}

}  // namespace

PlanSummary summarize(const compiler::KernelPlan& plan, const detail::GraphImpl& graph, int64_t world,
                      const std::string& link) {
  DimBindings dims;
  for (const auto& decl : graph.dims) dims[decl.name] = std::max(decl.lo, std::min<int64_t>(decl.hi, 4096));
  dims[std::string(detail::kRankDim)] = 0;
  PlanSummary s;
  std::map<std::string, int> count;
  int sharded = 0, kernels = 0;
  double est_comm = 0, est_all = 0;
  for (const auto& st : plan.steps) {
    est_all += st.est_seconds;
    const auto& body = *st.spec->body;
    if (st.spec->kind != ir::KernelKind::Collective) {
      ++kernels;
      sharded += reads_shard(body) ? 1 : 0;
      continue;
    }
    est_comm += st.est_seconds;
    const detail::Node& n = body.nodes[body.outputs.at(0).second];
    const detail::Node& in = body.nodes[n.inputs.at(0)];
    double bytes = static_cast<double>(dtype_size(n.dtype));
    for (const Dim& d : in.shape) bytes *= static_cast<double>(d.evaluate(dims));
    const double p = static_cast<double>(world);
    // What run_collective moves (dist/collectives.cpp): all_gather and the gathering
    // all_reduce receive the other ranks' operands, reduce_scatter one block from each,
    // the scatter-gather all_reduce P-1 blocks of ceil(n/P) elements twice.
    const bool split = n.op == detail::PrimOp::AllReduce && st.spec->launch.size() == 1 &&
                       st.spec->launch[0] == ir::kAllReduceScatterGather;
    const double es = static_cast<double>(dtype_size(n.dtype)), block = std::ceil(bytes / es / p) * es;
    s.comm_bytes += static_cast<int64_t>(split                                   ? 2 * (p - 1) * block
                                         : n.op == detail::PrimOp::ReduceScatter ? (p - 1) / p * bytes
                                                                                 : (p - 1) * bytes);
    ++s.collectives;
    ++count[std::string(detail::prim_name(n.op))];
    s.scatter_gather += split ? 1 : 0;
  }
  std::string ops;
  for (const auto& [name, c] : count) {
    ops += (ops.empty() ? "" : ", ") + std::to_string(c) + " " + name;
    if (name == "all_reduce" && s.scatter_gather > 0)
      ops += " (" + std::to_string(s.scatter_gather) + " as reduce-scatter + all_gather)";
  }
  char buf[512];
  std::snprintf(buf, sizeof buf,
                "tensor parallel over %lld ranks (%s): %s; %d of %d kernels read a weight shard; %lld bytes "
                "per rank per call; collectives estimated %.3g of %.3g s",
                static_cast<long long>(world), link.c_str(), ops.empty() ? "no collectives" : ops.c_str(), sharded,
                kernels, static_cast<long long>(s.comm_bytes), est_comm, est_all);
  s.text = buf;
  return s;
}

}  // namespace luminal::dist
