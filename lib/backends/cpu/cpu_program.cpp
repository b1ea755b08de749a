// Plan -> kernel::Program (see the header).
#include "backends/cpu/cpu_program.hpp"

#include <algorithm>
#include <cstdlib>

#include "backends/cpu/gemm_codegen.hpp"
#include "ir/tensor_lang.hpp"

namespace luminal::cpu {

namespace {

// The node giving each plan value its dtype and shape: a step's result is its body's
// output; a leaf takes the Input node of the first step that reads it ("%<slot>").
std::vector<const detail::Node*> value_nodes(const compiler::KernelPlan& p) {
  std::vector<const detail::Node*> out(p.leaf_name.size(), nullptr);
  for (const auto& st : p.steps) {
    const auto& body = *st.spec->body;
    out[st.result] = &body.nodes[body.outputs.at(0).second];
    for (const auto& n : body.nodes)
      if (n.op == detail::PrimOp::Input && n.name.size() > 1 && n.name[0] == '%') {
        const size_t s = static_cast<size_t>(std::strtoul(n.name.c_str() + 1, nullptr, 10));
        if (s < st.args.size() && !out[st.args[s]]) out[st.args[s]] = &n;
      }
  }
  return out;
}

// One buffer per plan value, in value order.
void add_value_buffers(const compiler::KernelPlan& p, LoweredPlan& out) {
  const size_t nv = p.leaf_name.size();
  out.direct_output.assign(nv, -1);
  for (size_t o = 0; o < p.outputs.size(); ++o) {
    const uint32_t v = p.outputs[o].second;
    if (p.leaf_name[v].empty() && out.direct_output[v] < 0) out.direct_output[v] = static_cast<int>(o);
  }
  const std::vector<const detail::Node*> node = value_nodes(p);
  out.value_shape.resize(nv);
  for (size_t v = 0; v < nv; ++v) {
    if (node[v]) out.value_shape[v] = node[v]->shape;
    kernel::Buffer b;
    // not "v" + to_string(v): GCC 12 warns falsely (-Wrestrict) on that form
    b.name = p.leaf_name[v].empty() ? std::to_string(v).insert(0, 1, 'v') : p.leaf_name[v];
    if (node[v]) {
      b.dtype = node[v]->dtype;
      b.elements = kernel::Index(1);
      for (const Dim& d : node[v]->shape) b.elements = b.elements * kernel::lower::dim_index(d, out.prog);
    } else {
      b.elements = kernel::Index(0);  // a leaf only passed through to an output (copied from the caller)
    }
    b.role = !p.leaf_name[v].empty()
                 ? (p.leaf_is_param[v] ? kernel::BufferRole::Param : kernel::BufferRole::Input)
             : out.direct_output[v] >= 0 ? kernel::BufferRole::Output
                                         : kernel::BufferRole::Intermediate;
    out.prog.buffers.push_back(b);
  }
}

}  // namespace

kernel::GemmTile cpu_gemm_tile(const ir::KernelSpec& spec) {
  // The micro tile the search chose (a TargetDesc::gemm_tiles entry: launch = {mr, nr,
  // kc}), when this ISA's register file holds it; cache blocks stay the ISA's defaults,
  // rounded to the tile.
  const CpuIsa isa = host_isa();
  const auto def = default_gemm_tile(isa);
  kernel::GemmTile t{def.mr, def.nr, def.mc, def.kc, def.nc};
  if (spec.launch.size() == 3) {
    const int mr = static_cast<int>(spec.launch[0]), nr = static_cast<int>(spec.launch[1]);
    if (micro_tile_fits(isa, mr, nr)) {
      t.mr = mr;
      t.nr = nr;
      t.kc = static_cast<int>(spec.launch[2]);
      t.mc = std::max(mr, def.mc / mr * mr);
      t.nc = std::max(nr, def.nc / nr * nr);
    }
  }
  return t;
}

LoweredPlan lower_plan(const compiler::KernelPlan& p, kernel::lower::Options opt) {
  if (!opt.gemm_tile) opt.gemm_tile = cpu_gemm_tile;
  LoweredPlan out;
  add_value_buffers(p, out);
  for (size_t s = 0; s < p.steps.size(); ++s) {
    const auto& st = p.steps[s];
    std::vector<int> args(st.args.begin(), st.args.end());
    PlanStep ps;
    ps.k0 = static_cast<int>(out.prog.kernels.size());
    const size_t nb = out.prog.buffers.size();
    if (st.spec->kind == ir::KernelKind::Collective) {
      ps.collective = true;  // no kernel: the executable calls the communicator
    } else if (auto failed = kernel::lower::lower_spec(*st.spec, args, static_cast<int>(st.result),
                                                       std::to_string(s).insert(0, 1, 'k'), out.prog, opt)) {
      ps.interpreted = true;
      ++out.interpreted;
      out.interpreted_why += (out.interpreted_why.empty() ? "" : "; ") + std::string("step ") +
                             std::to_string(s) + " (" + ir::kind_name(st.spec->kind) + "): " + failed->why;
    }
    for (size_t b = nb; b < out.prog.buffers.size(); ++b) out.temp_step.push_back(static_cast<int>(s));
    ps.k1 = static_cast<int>(out.prog.kernels.size());
    out.steps.push_back(ps);
  }
  return out;
}

}  // namespace luminal::cpu
