#include "rules/registry.hpp"

#include "luminal/error.hpp"

namespace luminal::rules {

namespace {

bool listed(const std::vector<std::string>& names, std::string_view x) {
  for (const std::string& n : names)
    if (n == x) return true;
  return false;
}

}  // namespace

// The compiler's rule sets, listed here once. Within a set, rules keep the order their
// file writes them in (the scheduler visits rules in this order).
const Registry& Registry::global() {
  static const Registry r = [] {
    Registry reg;
    reg.add(algebra_rules());
    reg.add(movement_rules());
    reg.add(contraction_rules());
    reg.add(lower_reference_rules());
    reg.add(lower_cpu_rules());
    reg.add(fusion_rules());
    reg.add(schedule_gpu_rules());
    reg.add(sharding_rules());
    return reg;
  }();
  return r;
}

void Registry::add(RuleSet set) {
  if (set.name.empty()) throw InternalError("[rules] a rule set needs a name");
  for (RuleInfo& info : set.rules) {
    info.set = set.name;
    if (info.name.empty()) throw InternalError("[rules] a rule of set '" + set.name + "' has no name");
    if (static_cast<bool>(info.rule) == static_cast<bool>(info.pass))
      throw InternalError("[rules] rule '" + info.name + "' must have exactly one of `rule` and `pass`");
    if (info.rule && info.rule->name() != info.name)
      throw InternalError("[rules] rule '" + info.name + "' carries an engine rule named '" +
                          info.rule->name() + "'");
    if (find(info.name)) throw InternalError("[rules] rule '" + info.name + "' is registered twice");
    rules_.push_back(std::move(info));
  }
}

std::vector<const RuleInfo*> Registry::set(std::string_view name, bool fast_math,
                                           const std::vector<std::string>& skip) const {
  std::vector<const RuleInfo*> out;
  if (listed(skip, name)) return out;
  for (const RuleInfo& r : rules_)
    if (r.set == name && (fast_math || !r.fast_math) && !listed(skip, r.name)) out.push_back(&r);
  return out;
}

std::vector<TensorRule> Registry::engine_rules(const std::vector<std::string>& sets, bool fast_math,
                                               const std::vector<std::string>& skip) const {
  std::vector<TensorRule> out;
  for (const std::string& s : sets)
    for (const RuleInfo* r : set(s, fast_math, skip))
      if (r->rule) out.push_back(*r->rule);
  return out;
}

void Registry::check_skippable(const std::vector<std::string>& skip) const {
  for (const std::string& n : skip) {
    const RuleInfo* r = find(n);
    bool is_set = false;
    for (const RuleInfo& x : rules_) is_set = is_set || x.set == n;
    if (!r && !is_set) throw CompileError("[compile] skip_rules: no rule or rule set is named '" + n + "'");
    if (n == "lower_reference" || (r && r->set == "lower_reference"))
      throw CompileError("[compile] skip_rules: '" + n +
                         "' is the required lowering (every math node needs a kernel); it cannot be skipped");
  }
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
