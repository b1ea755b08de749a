#include "backends/gpu/gpu_program.hpp"

#include <cstdlib>

#include "backends/cpu/lower_body.hpp"

namespace luminal::gpu {

LoweredPlan lower_plan(const compiler::KernelPlan& p) {
  LoweredPlan out;
  kernel::Program& prog = out.prog;
  const size_t nv = p.leaf_name.size();
  std::vector<bool> output(nv, false);
  for (const auto& [name, v] : p.outputs) output[v] = p.leaf_name[v].empty();
  // Shapes of values: a leaf's from a step that reads it, a result's from its body.
  std::vector<const detail::Node*> value_node(nv, nullptr);
  for (const auto& st : p.steps) {
    const auto& body = *st.spec->body;
    value_node[st.result] = &body.nodes[body.outputs.at(0).second];
    for (const auto& n : body.nodes)
      if (n.op == detail::PrimOp::Input && n.name.size() > 1 && n.name[0] == '%') {
        const size_t s = static_cast<size_t>(std::strtoul(n.name.c_str() + 1, nullptr, 10));
        if (s < st.args.size() && !value_node[st.args[s]]) value_node[st.args[s]] = &n;
      }
  }
  for (size_t v = 0; v < nv; ++v) {
    kernel::Buffer b;
    b.name = p.leaf_name[v];
    if (b.name.empty()) b.name.append("v").append(std::to_string(v));
    b.elements = kernel::Index(0);
    if (value_node[v]) {
      b.dtype = value_node[v]->dtype;
      b.elements = kernel::Index(1);
      for (const Dim& d : value_node[v]->shape) b.elements = b.elements * cpu::dim_index(d, prog);
    }
    b.role = !p.leaf_name[v].empty() ? (p.leaf_is_param[v] ? kernel::BufferRole::Param : kernel::BufferRole::Input)
             : output[v]             ? kernel::BufferRole::Output
                                     : kernel::BufferRole::Intermediate;
    prog.buffers.push_back(b);
  }
  for (size_t s = 0; s < p.steps.size(); ++s) {
    const auto& st = p.steps[s];
    std::vector<int> args(st.args.begin(), st.args.end());
    std::string why;
    std::string name = "k";
    name.append(std::to_string(s));
    if (!cpu::lower_spec(*st.spec, args, static_cast<int>(st.result), name, prog, &why)) {
      // Built with append: GCC 12 warns falsely (-Wrestrict) on operator+ chains here.
      ++out.interpreted;
      if (!out.interpreted_why.empty()) out.interpreted_why.append("; ");
      out.interpreted_why.append("step ").append(std::to_string(s)).append(" (");
      out.interpreted_why.append(ir::kind_name(st.spec->kind)).append("): ").append(why);
    }
  }
  return out;
}

ScheduleOf plan_schedules(const compiler::KernelPlan& plan) {
  const compiler::KernelPlan* p = &plan;
  return [p](const kernel::Kernel& k) -> std::vector<int64_t> {
    if (k.name.size() < 2 || k.name[0] != 'k') return {};
    const size_t step = static_cast<size_t>(std::strtoul(k.name.c_str() + 1, nullptr, 10));
    if (step >= p->steps.size()) return {};
    return p->steps[step].spec->launch;
  };
}

}  // namespace luminal::gpu
