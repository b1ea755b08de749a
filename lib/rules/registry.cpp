#include "rules/registry.hpp"

#include "luminal/error.hpp"

namespace luminal::rules {

Registry& Registry::global() {
  static Registry r;
  return r;
}

void Registry::add(RuleInfo info) {
  if (info.name.empty() || info.set.empty()) throw InternalError("[rules] a rule needs a name and a set");
  if (static_cast<bool>(info.rule) == static_cast<bool>(info.pass))
    throw InternalError("[rules] rule '" + info.name + "' must have exactly one of `rule` and `pass`");
  if (find(info.name)) throw InternalError("[rules] rule '" + info.name + "' is registered twice");
  rules_.push_back(std::move(info));
}

std::vector<const RuleInfo*> Registry::set(std::string_view name, bool fast_math) const {
  std::vector<const RuleInfo*> out;
  for (const RuleInfo& r : rules_)
    if (r.set == name && (fast_math || !r.fast_math)) out.push_back(&r);
  return out;
}

std::vector<TensorRule> Registry::engine_rules(const std::vector<std::string>& sets, bool fast_math) const {
  std::vector<TensorRule> out;
  for (const std::string& s : sets)
    for (const RuleInfo* r : set(s, fast_math))
      if (r->rule) out.push_back(*r->rule);
  return out;
}

const RuleInfo* Registry::find(std::string_view name) const {
  for (const RuleInfo& r : rules_)
    if (r.name == name) return &r;
  return nullptr;
}

std::size_t apply_once(const RuleInfo& rule, EGraph& g, const PassContext& ctx) {
  if (!g.is_clean()) g.rebuild();
  std::size_t applied = 0;
  if (rule.pass) {
    applied = rule.pass(g, ctx);
  } else {
    egraph::Matches ms;
    rule.rule->search(g, g.index(), ms);
    applied = rule.rule->apply(g, ms);
  }
  g.rebuild();
  return applied;
}

}  // namespace luminal::rules
