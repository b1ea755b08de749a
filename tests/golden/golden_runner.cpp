#include "golden/golden_runner.hpp"

#include <exception>
#include <map>

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
  return std::string(kind) + ": " + e.what();
}

std::string prefix(size_t i) { return "c" + std::to_string(i) + "_"; }

}  // namespace

std::vector<CaseResult> run_cases(const std::vector<const Case*>& cases, const lm::Target& target) {
  std::vector<CaseResult> results(cases.size());
  for (size_t i = 0; i < cases.size(); ++i) results[i].c = cases[i];

  lm::Graph g;
  std::map<std::string, lm::HostTensor> feeds, params;
  std::vector<size_t> built;
  for (size_t i = 0; i < cases.size(); ++i) {
    const Case& c = *cases[i];
    try {
      std::vector<lm::Operand> args;
      std::map<std::string, lm::HostTensor> my_feeds, my_params;
      for (const Operand& o : c.inputs) {
        if (o.is_scalar) {
          args.emplace_back(o.scalar);
          continue;
        }
        const std::string name = prefix(i) + o.name;
        const std::vector<lm::Dim> shape(o.value->shape().begin(), o.value->shape().end());
        lm::Tensor t = o.param ? g.param(name, shape, o.value->dtype()) : g.input(name, shape, o.value->dtype());
        args.emplace_back(apply_view(t, o.view));
        (o.param ? my_params : my_feeds).emplace(name, *o.value);
      }
      g.output(prefix(i) + "out", build_op(c, args));
      feeds.merge(my_feeds);
      params.merge(my_params);
      built.push_back(i);
    } catch (const std::exception& e) {
      results[i].message = "building the graph threw " + describe(e);
    }
  }
  if (built.empty()) return results;

  try {
    lm::Callable fn = lm::compile(g, target);
    for (const auto& [name, value] : params) fn.bind(name, value);
    const std::map<std::string, lm::HostTensor> out = fn(feeds);
    for (size_t i : built) {
      auto it = out.find(prefix(i) + "out");
      if (it == out.end()) {
        results[i].message = "the Callable returned no output '" + prefix(i) + "out'";
        continue;
      }
      auto diff = compare(cases[i]->expected, it->second);
      results[i].ok = !diff.has_value();
      if (diff) results[i].message = *diff;
    }
  } catch (const std::exception& e) {
    if (built.size() == 1) {
      results[built[0]].message = "compiling or running threw " + describe(e);
    } else {
      for (size_t i : built) results[i] = run_cases({cases[i]}, target).front();
    }
  }
  return results;
}

}  // namespace golden
