#include "golden/golden_runner.hpp"

#include <cstdlib>
#include <algorithm>
#include <exception>
#include <map>
#include <set>

#include "golden/golden_ops.hpp"

namespace golden {

namespace lm = luminal;

namespace {

std::string describe(const std::exception& e) {
  const char* kind = dynamic_cast<const lm::ShapeError*>(&e)      ? "ShapeError"
                     : dynamic_cast<const lm::DTypeError*>(&e)    ? "DTypeError"
                     : dynamic_cast<const lm::CompileError*>(&e)  ? "CompileError"
                     : dynamic_cast<const lm::RuntimeError*>(&e)  ? "RuntimeError"
                     : dynamic_cast<const lm::InternalError*>(&e) ? "InternalError"
                     : dynamic_cast<const lm::Error*>(&e)         ? "Error"
                                                                  : "std::exception";
  // appends rather than chained operator+: GCC 12 warns falsely (-Wrestrict) on those
  std::string out = kind;
  out += ": ";
  out += e.what();
  return out;
}

std::string prefix(size_t i) {
  std::string p = "c";
  p += std::to_string(i);
  p += '_';
  return p;
}

/// The search budget of golden compiles. The golden test checks semantics, and every
/// rewrite preserves them whatever the budget, so a smaller e-graph than the default
/// (200k nodes) keeps the ~900 compiles at seconds while every rule set still runs.
lm::CompileOptions golden_options() {
  lm::CompileOptions o;
  o.node_limit = 20000;
  o.time_budget_seconds = 2.0;
  // LUMINAL_GOLDEN_TIME_BUDGET=<seconds>: a shorter search, as a sanitizer build's 2 s
  // are (the plans an unfinished search extracts must compile as well).
  if (const char* b = std::getenv("LUMINAL_GOLDEN_TIME_BUDGET"); b && *b)
    o.time_budget_seconds = std::atof(b);
  return o;
}

/// Whether axis `axis` of operand `index` may be declared symbolic in symbolic mode. Not
/// where the API needs constants or the case's constants are tied to that extent:
///  * params (weights have fixed shapes) and operands with a view (the view's constant
///    slice bounds / expand targets would have to be proven equal to the variable);
///  * expand and reshape, whose target shapes are constants in the data;
///  * conv weights (out channels and kernel size are constant by the ops' design) and
///    rope's head dim (its frequencies are computed at build time).
bool may_be_symbolic(const Case& c, size_t index, size_t axis, size_t rank) {
  const Operand& o = c.inputs[index];
  if (o.param || !o.view.empty()) return false;
  if (c.op == "expand" || c.op == "reshape") return false;
  if ((c.op == "conv1d" || c.op == "conv2d") && (index == 1 || axis == 1)) return false;
  if (c.op == "rope" && index == 0 && axis + 1 == rank) return false;
  return true;
}

/// Extents that stay constant in every operand of the case: an extent is symbolic only
/// where ALL its occurrences may be, so no constant is ever compared with the variable
/// standing for the same value.
std::set<int64_t> pinned_extents(const Case& c) {
  std::set<int64_t> pinned{0, 1};
  for (size_t k = 0; k < c.inputs.size(); ++k) {
    if (c.inputs[k].is_scalar) continue;
    const auto& extents = c.inputs[k].value->shape();
    for (size_t ax = 0; ax < extents.size(); ++ax) {
      if (!may_be_symbolic(c, k, ax, extents.size())) pinned.insert(extents[ax]);
    }
    // extents a view creates are constants of the data too
    std::vector<int64_t> viewed = extents;
    for (const auto& v : c.inputs[k].view) {
      const std::string op = v.at("op").get<std::string>();
      if (op == "expand") {
        for (int64_t e : v.at("shape").get<std::vector<int64_t>>()) pinned.insert(e);
      } else if (op == "slice") {
        const auto axis = static_cast<size_t>(v.at("axis").get<int>());
        const int64_t n = viewed.at(axis), step = v.at("step").get<int64_t>();
        const int64_t start = std::clamp<int64_t>(v.at("start").get<int64_t>(), 0, n);
        const int64_t end = std::clamp<int64_t>(v.at("end").get<int64_t>(), start, n);
        viewed[axis] = (end - start + step - 1) / step;
        pinned.insert(viewed[axis]);
      }
    }
  }
  return pinned;
}

}  // namespace

std::vector<CaseResult> run_cases(const std::vector<const Case*>& cases, const lm::Target& target,
                                  RunOptions options) {
  const bool symbolic = options.symbolic;
  std::vector<CaseResult> results(cases.size());
  for (size_t i = 0; i < cases.size(); ++i) results[i].c = cases[i];

  lm::Graph g;
  std::map<int64_t, lm::Dim> named_dims;  // extent -> its symbolic dim
  auto dim_of = [&](int64_t extent, const std::set<int64_t>& pinned) -> lm::Dim {
    if (!symbolic || pinned.count(extent)) return extent;
    auto it = named_dims.find(extent);
    if (it == named_dims.end())
      it = named_dims.emplace(extent, g.dim(std::string("n").append(std::to_string(extent)), 2, 4096)).first;
    return it->second;
  };
  std::map<std::string, lm::HostTensor> feeds, params;
  std::vector<size_t> built;
  for (size_t i = 0; i < cases.size(); ++i) {
    const Case& c = *cases[i];
    try {
      std::vector<lm::Operand> args;
      std::map<std::string, lm::HostTensor> my_feeds, my_params;
      const std::set<int64_t> pinned = symbolic ? pinned_extents(c) : std::set<int64_t>{};
      for (size_t k = 0; k < c.inputs.size(); ++k) {
        const Operand& o = c.inputs[k];
        if (o.is_scalar) {
          args.push_back(o.int_scalar ? lm::Operand(static_cast<int>(o.scalar)) : lm::Operand(o.scalar));
          continue;
        }
        const std::string name = prefix(i) + o.name;
        std::vector<lm::Dim> shape;
        const auto& extents = o.value->shape();
        for (size_t ax = 0; ax < extents.size(); ++ax) {
          shape.push_back(dim_of(extents[ax], pinned));
          results[i].symbolic |= !shape.back().is_constant();
        }
        lm::Tensor t =
            o.param ? g.param(name, shape, o.value->dtype()) : g.input(name, shape, o.value->dtype());
        args.push_back(lm::Operand(apply_view(t, o.view)));
        (o.param ? my_params : my_feeds).emplace(name, *o.value);
      }
      g.output(prefix(i).append("out"), options.members ? build_op_member(c, args) : build_op(c, args));
      feeds.merge(my_feeds);
      params.merge(my_params);
      built.push_back(i);
    } catch (const std::exception& e) {
      results[i].message = std::string("building the graph threw ").append(describe(e));
    }
  }
  if (built.empty()) return results;

  try {
    lm::CompileOptions co = golden_options();
    co.compile_only = options.compile_only;
    lm::Callable fn = lm::compile(g, target, co);
    if (options.compile_only) {
      const lm::CompileReport& r = fn.report();
      std::string why;
      if (r.generated_kernels != r.kernels || r.interpreted_kernels != 0)
        why = "generated " + std::to_string(r.generated_kernels) + " of " + std::to_string(r.kernels) +
              " kernels, " + std::to_string(r.interpreted_kernels) + " interpreted: " + r.stop_reason;
      for (const lm::KernelResources& k : r.kernel_resources)
        if (k.spill_bytes > 0) why += " kernel " + k.name + " spills " + std::to_string(k.spill_bytes) + " bytes;";
      for (size_t i : built) {
        results[i].stop_reason = r.codegen;
        results[i].ok = why.empty();
        results[i].message = why;
      }
      return results;
    }
    for (const auto& [name, value] : params) fn.bind(name, value);
    const std::map<std::string, lm::HostTensor> out = fn(feeds);
    for (size_t i : built) {
      results[i].stop_reason = fn.report().stop_reason;
      auto it = out.find(prefix(i).append("out"));
      if (it == out.end()) {
        results[i].message =
            std::string("the Callable returned no output '").append(prefix(i)).append("out'");
        continue;
      }
      auto diff = compare(cases[i]->expected, it->second);
      results[i].ok = !diff.has_value();
      if (diff) results[i].message = *diff;
    }
  } catch (const std::exception& e) {
    if (built.size() == 1) {
      results[built[0]].message = std::string("compiling or running threw ").append(describe(e));
    } else {
      for (size_t i : built) results[i] = run_cases({cases[i]}, target, options).front();
    }
  }
  return results;
}

}  // namespace golden
