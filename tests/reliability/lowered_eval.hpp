// Runs a compiled program's kernel plan the way the CPU target does -- lowered to kernel
// IR (cpu::lower_plan: the lowering every backend shares), steps in plan order, steps the
// lowering leaves to the interpreter run by the interpreter -- but executes the kernel IR
// with the in-process evaluator (kernel/kernel_eval.hpp) instead of rendering C and
// compiling it. What this checks: the search's plan and the lowering to kernel IR (index
// arithmetic of views, pads, reductions, GEMM and gather kinds, temporaries, buffer
// sizes -- every load and store is bounds-checked by the evaluator); what it does not: the
// C renderer, the C prelude's math and the compiled code (the JIT path checks those).
// Intermediate and output buffers start as NaN bit patterns, so an element no kernel
// writes shows up as a difference. The graph fuzzer (tests/fuzz/fuzz_graph_build.cpp)
// runs every input through this; the C compiler sees a sampled fraction.
#pragma once

#include <cstdint>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "backends/cpu/cpu_program.hpp"
#include "backends/reference/interpreter.hpp"
#include "compiler/plan.hpp"
#include "kernel/kernel_eval.hpp"
#include "luminal/error.hpp"
#include "luminal/host_tensor.hpp"

namespace luminal::test {

/// Outputs of `plan` on `tensors` (every input and param by name) with `dims` bound.
/// Throws InternalError when the lowered program disagrees with the plan about a size
/// or reads or writes outside a buffer. `interpreted` (optional) receives the number of
/// steps the lowering left to the interpreter. `opt`: the CPU's lowering options, or the
/// GPU backends' (`{}`, as gpu_backend.cpp lowers).
inline std::map<std::string, HostTensor> run_lowered(
    const compiler::KernelPlan& plan, const DimBindings& dims,
    const std::map<std::string, const HostTensor*>& tensors, int64_t* interpreted = nullptr,
    const kernel::lower::Options& opt = cpu::cpu_lower_options()) {
  const cpu::LoweredPlan lp = cpu::lower_plan(plan, opt);
  if (interpreted) *interpreted = lp.interpreted;
  const kernel::Program& prog = lp.prog;
  std::map<std::string, int64_t> syms;
  for (const std::string& s : prog.symbols) {
    auto it = dims.find(s);
    if (it == dims.end()) throw InternalError("[lowered eval] symbol '" + s + "' is not a bound dim");
    syms[s] = it->second;
  }
  auto dim_values = [&](const std::vector<Dim>& shape) {
    std::vector<int64_t> out;
    for (const Dim& d : shape) out.push_back(d.evaluate(dims));
    return out;
  };
  // One allocation per buffer, sized from the program's own element count (what the
  // evaluator bounds-checks against).
  std::vector<std::vector<std::byte>> storage(prog.buffers.size());
  std::vector<void*> ptr(prog.buffers.size(), nullptr);
  for (size_t b = 0; b < prog.buffers.size(); ++b) {
    const kernel::Buffer& buf = prog.buffers[b];
    const int64_t n = buf.elements.evaluate({}, syms);
    if (n < 0)
      throw InternalError("[lowered eval] buffer " + buf.name + " has " + std::to_string(n) + " elements");
    storage[b].assign(static_cast<size_t>(n) * dtype_size(buf.dtype), std::byte{0xff});
    ptr[b] = storage[b].data();
    if (b >= plan.leaf_name.size() || plan.leaf_name[b].empty() || n == 0) continue;
    auto it = tensors.find(plan.leaf_name[b]);
    if (it == tensors.end() || !it->second)
      throw InternalError("[lowered eval] no data for " + plan.leaf_name[b]);
    if (it->second->nbytes() != storage[b].size() || it->second->dtype() != buf.dtype)
      throw InternalError("[lowered eval] leaf " + plan.leaf_name[b] + ": the program's buffer holds " +
                          std::to_string(storage[b].size()) + " bytes, the tensor " +
                          std::to_string(it->second->nbytes()));
    std::memcpy(storage[b].data(), it->second->data(), storage[b].size());
  }
  // Params stored packed: the pack holds its members one after another (as runtimes lay it).
  for (const kernel::ParamPack& pk : prog.packs) {
    size_t at = 0;
    for (int m : pk.members) {
      const auto& from = storage[static_cast<size_t>(m)];
      if (at + from.size() > storage[static_cast<size_t>(pk.buffer)].size())
        throw InternalError("[lowered eval] pack " + prog.buffers[static_cast<size_t>(pk.buffer)].name +
                            " is smaller than its members");
      std::memcpy(storage[static_cast<size_t>(pk.buffer)].data() + at, from.data(), from.size());
      at += from.size();
    }
  }
  bool any_interpreted = false;
  for (const cpu::PlanStep& st : lp.steps)
    any_interpreted = any_interpreted || st.interpreted || st.collective;
  if (!any_interpreted) {
    kernel::evaluate(prog, ptr, syms);
  } else {
    for (size_t s = 0; s < lp.steps.size(); ++s) {
      const cpu::PlanStep& es = lp.steps[s];
      if (es.collective) throw InternalError("[lowered eval] a collective step without a communicator");
      if (!es.interpreted) {
        kernel::Program part{prog.buffers, prog.symbols, {}, prog.blocks, prog.packs};
        part.kernels.assign(prog.kernels.begin() + es.k0, prog.kernels.begin() + es.k1);
        kernel::evaluate(part, ptr, syms);
        continue;
      }
      // As the CPU executable does: the interpreter on views of the step's buffers.
      const auto& step = plan.steps[s];
      const auto& body = *step.spec->body;
      std::map<std::string, HostTensor> views;
      std::map<std::string, const HostTensor*> args;
      for (const auto& n : body.nodes) {
        if (n.op != detail::PrimOp::Input) continue;
        const size_t slot = static_cast<size_t>(std::strtoul(n.name.c_str() + 1, nullptr, 10));
        const std::vector<int64_t> shape = dim_values(n.shape);
        auto& t = views
                      .insert_or_assign(
                          n.name,
                          HostTensor::view(n.dtype, shape, static_cast<const void*>(ptr[step.args.at(slot)])))
                      .first->second;
        if (t.nbytes() > storage[step.args[slot]].size())
          throw InternalError("[lowered eval] step " + std::to_string(s) + " reads past buffer " +
                              std::to_string(step.args[slot]));
        args[n.name] = &t;
      }
      auto res = detail::reference::run(body, dims, args);
      const HostTensor& r = res.at("out");
      if (r.nbytes() != storage[step.result].size())
        throw InternalError("[lowered eval] step " + std::to_string(s) + " gives " +
                            std::to_string(r.nbytes()) + " bytes for a buffer of " +
                            std::to_string(storage[step.result].size()));
      if (r.nbytes()) std::memcpy(ptr[step.result], r.data(), r.nbytes());
    }
  }
  std::map<std::string, HostTensor> out;
  for (const auto& [name, v] : plan.outputs) {
    if (!plan.leaf_name[v].empty()) {
      auto it = tensors.find(plan.leaf_name[v]);
      if (it == tensors.end() || !it->second)
        throw InternalError("[lowered eval] no data for " + plan.leaf_name[v]);
      out.insert_or_assign(name, *it->second);
      continue;
    }
    const std::vector<int64_t> shape = dim_values(lp.value_shape[v]);
    const DType dt = prog.buffers[v].dtype;
    int64_t count = 1;
    for (int64_t d : shape) count *= d;
    if (static_cast<size_t>(count) * dtype_size(dt) != storage[v].size())
      throw InternalError("[lowered eval] output " + name + " has " + std::to_string(count) +
                          " elements, its buffer " + std::to_string(storage[v].size()) + " bytes");
    out.insert_or_assign(name, HostTensor::from_bytes(dt, shape, std::span<const std::byte>(storage[v])));
  }
  return out;
}

}  // namespace luminal::test
