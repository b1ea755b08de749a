#include "compiler/plan.hpp"

#include <cstdio>
#include <map>
#include <sstream>

#include "backends/reference/interpreter.hpp"
#include "dist/collectives.hpp"
#include "luminal/error.hpp"

namespace luminal::compiler {

namespace {

class PlanExecutable final : public detail::Executable {
 public:
  PlanExecutable(std::shared_ptr<const KernelPlan> p, std::shared_ptr<Communicator> comm)
      : plan_(std::move(p)), comm_(std::move(comm)) {
    last_use_.assign(plan_->leaf_name.size(), -1);
    for (size_t s = 0; s < plan_->steps.size(); ++s)
      for (uint32_t a : plan_->steps[s].args) last_use_[a] = static_cast<int>(s);
    for (const auto& [name, v] : plan_->outputs) last_use_[v] = static_cast<int>(plan_->steps.size());
  }

  std::map<std::string, HostTensor> run(
      const DimBindings& dims, const std::map<std::string, const HostTensor*>& tensors) const override {
    const KernelPlan& p = *plan_;
    std::vector<std::shared_ptr<const HostTensor>> val(p.leaf_name.size());
    for (size_t v = 0; v < p.leaf_name.size(); ++v) {
      if (p.leaf_name[v].empty()) continue;
      auto it = tensors.find(p.leaf_name[v]);
      if (it == tensors.end() || !it->second)
        throw RuntimeError("[compiled program] no data for '" + p.leaf_name[v] + "'");
      val[v] =
          std::shared_ptr<const HostTensor>(std::shared_ptr<const HostTensor>(), it->second);  // not owned
    }
    std::map<std::string, const HostTensor*> args;
    for (size_t s = 0; s < p.steps.size(); ++s) {
      const KernelPlan::Step& st = p.steps[s];
      if (st.spec->kind == ir::KernelKind::Collective) {
        if (!comm_) throw RuntimeError("[compiled program] the program has collectives: it runs with the communicator it was compiled for");
        const HostTensor& x = *val[st.args.at(0)];
        const detail::Node& n = st.spec->body->nodes[st.spec->body->outputs.at(0).second];
        std::vector<int64_t> shape;
        for (const Dim& d : n.shape) shape.push_back(d.evaluate(dims));
        HostTensor r(n.dtype, shape);
        dist::run_collective(*comm_, *st.spec, x.shape(), x.data(), r.mutable_data());
        val[st.result] = std::make_shared<const HostTensor>(std::move(r));
        for (uint32_t a : st.args)
          if (last_use_[a] == static_cast<int>(s)) val[a].reset();
        continue;
      }
      args.clear();
      for (size_t i = 0; i < st.args.size(); ++i)
        args.emplace(ir::slot_name(static_cast<uint32_t>(i)), val[st.args[i]].get());
      auto out = detail::reference::run(*st.spec->body, dims, args);
      val[st.result] = std::make_shared<const HostTensor>(std::move(out.at("out")));
      for (uint32_t a : st.args)
        if (last_use_[a] == static_cast<int>(s)) val[a].reset();
    }
    std::map<std::string, HostTensor> result;
    for (const auto& [name, v] : p.outputs) {
      const HostTensor& t = *val[v];
      // Owned copy: an output may be a caller's input or another output's buffer.
      result.emplace(name, HostTensor::from_bytes(t.dtype(), t.shape(),
                                                  std::span<const std::byte>(t.data(), t.nbytes())));
    }
    return result;
  }

 private:
  std::shared_ptr<const KernelPlan> plan_;
  std::shared_ptr<Communicator> comm_;
  std::vector<int> last_use_;
};

std::string body_summary(const ir::KernelSpec& k) {
  std::map<std::string, int> ops;
  for (const auto& n : k.body->nodes)
    if (n.op != detail::PrimOp::Input) ++ops[std::string(detail::prim_name(n.op))];
  std::string s;
  for (const auto& [name, c] : ops) {
    if (!s.empty()) s += ' ';
    s += name;
    if (c > 1) s.append("x").append(std::to_string(c));  // appends: GCC 12's false -Wrestrict
  }
  return s;
}

}  // namespace

std::string KernelPlan::to_dot() const {
  std::ostringstream os;
  os << "digraph kernels {\n  rankdir=TB;\n  node [fontname=\"Helvetica\", fontsize=10];\n";
  std::vector<int> producer(leaf_name.size(), -1);
  for (size_t s = 0; s < steps.size(); ++s) producer[steps[s].result] = static_cast<int>(s);
  for (size_t v = 0; v < leaf_name.size(); ++v)
    if (!leaf_name[v].empty())
      os << "  v" << v << " [shape=ellipse, style=filled, fillcolor=\""
         << (leaf_is_param[v] ? "#e8e8e8" : "#cfe8ff") << "\", label=\"" << leaf_name[v] << "\"];\n";
  for (size_t s = 0; s < steps.size(); ++s) {
    const Step& st = steps[s];
    std::string tiles;
    for (size_t i = 0; i < st.spec->launch.size(); ++i)
      tiles += (i ? "x" : " tiles ") + std::to_string(st.spec->launch[i]);
    char est[64];
    std::snprintf(est, sizeof est, "%.3g us", st.est_seconds * 1e6);
    os << "  v" << st.result << " [shape=box, style=\"rounded,filled\", fillcolor=\""
       << (st.spec->kind == ir::KernelKind::Gemm || st.spec->kind == ir::KernelKind::LibraryGemm ? "#ffd9a8"
           : st.spec->kind == ir::KernelKind::Reduction                                          ? "#d4f0c0"
                                                                                                 : "#fff6b0")
       << "\", label=\"k" << s << " (c" << st.eclass << "): " << ir::kind_name(st.spec->kind) << tiles
       << "\\n"
       << body_summary(*st.spec) << "\\n"
       << est << "\"];\n";
    for (uint32_t a : st.args) os << "  v" << a << " -> v" << st.result << ";\n";
  }
  for (const auto& [name, v] : outputs)
    os << "  out_" << v << "_" << name << " [shape=plaintext, label=\"" << name << "\"];\n  v" << v
       << " -> out_" << v << "_" << name << ";\n";
  os << "}\n";
  return os.str();
}

std::shared_ptr<const detail::Executable> make_plan_executable(std::shared_ptr<const KernelPlan> plan,
                                                               std::shared_ptr<Communicator> comm) {
  return std::make_shared<PlanExecutable>(std::move(plan), std::move(comm));
}

}  // namespace luminal::compiler
