// Call validation: names, dtypes, ranks, binding dims from concrete shapes, ranges and
// guards. Everything here throws RuntimeError and touches no state, so a Callable
// stays usable after a bad call.
#include <deque>
#include <set>

#include "graph/diagnostics.hpp"
#include "graph/dim_vars.hpp"
#include "runtime/executable.hpp"

namespace luminal::detail {

namespace {

std::string ints(const std::vector<int64_t>& s) {
  std::string t = "(";
  for (size_t i = 0; i < s.size(); ++i) t += (i ? ", " : "") + std::to_string(s[i]);
  return t + ")";
}

std::string names_of(const GraphImpl& g, const std::vector<uint32_t>& ids) {
  std::string s;
  for (uint32_t id : ids) s += (s.empty() ? "" : ", ") + g.nodes[id].name;
  return s.empty() ? "(none)" : s;
}

struct Slot {
  const Node* node;
  const HostTensor* data;
  const char* kind;  // "input" / "param"
};

[[noreturn]] void bad(const std::string& msg) { throw RuntimeError("[call] " + msg); }

}  // namespace

DimBindings validate_call(const GraphImpl& g, const std::map<std::string, HostTensor>& inputs,
                          const std::map<std::string, std::shared_ptr<const HostTensor>>& params,
                          const std::map<std::string, ParamRegion>& blocks) {
  std::vector<Slot> slots;
  std::deque<Node> block_nodes;  // a param stored as a block is declared with the block's shape
  for (const auto& [name, t] : inputs) {
    bool found = false;
    for (uint32_t id : g.inputs) found = found || g.nodes[id].name == name;
    if (found) continue;
    for (uint32_t id : g.params)
      if (g.nodes[id].name == name)
        bad("'" + name + "' is a param: bind it once with Callable::bind, not per call");
    bad("unknown input '" + name + "'; the inputs are: " + names_of(g, g.inputs));
  }
  for (uint32_t id : g.inputs) {
    const Node& n = g.nodes[id];
    auto it = inputs.find(n.name);
    if (it == inputs.end())
      bad("missing input '" + n.name + "' " + shape_string(n.shape) + " " + std::string(dtype_name(n.dtype)));
    slots.push_back({&n, &it->second, "input"});
  }
  for (uint32_t id : g.params) {
    const Node& n = g.nodes[id];
    auto it = params.find(n.name);
    if (it == params.end() || !it->second)
      bad("param '" + n.name + "' " + shape_string(n.shape) + " is not bound: call bind(\"" + n.name +
          "\", ...)");
    if (auto b = blocks.find(n.name); b != blocks.end()) {
      Node& bn = block_nodes.emplace_back(n);
      bn.shape.clear();
      for (size_t a = 0; a < b->second.start.size(); ++a) bn.shape.emplace_back(b->second.end[a] - b->second.start[a]);
      slots.push_back({&bn, it->second.get(), "param (this rank's block)"});
      continue;
    }
    slots.push_back({&n, it->second.get(), "param"});
  }

  for (const Slot& s : slots) {
    const Node& n = *s.node;
    const HostTensor& t = *s.data;
    if (t.dtype() != n.dtype)
      bad(std::string(s.kind) + " '" + n.name + "' is " + std::string(dtype_name(t.dtype())) + " " +
          ints(t.shape()) + ", declared " + std::string(dtype_name(n.dtype)) + " " + shape_string(n.shape));
    if (t.shape().size() != n.shape.size())
      bad(std::string(s.kind) + " '" + n.name + "' has rank " + std::to_string(t.shape().size()) + " " +
          ints(t.shape()) + ", declared rank " + std::to_string(n.shape.size()) + " " +
          shape_string(n.shape));
  }

  // Every variable the program needs, with its range.
  std::map<std::string, VarRange> vars;
  for (uint32_t id : live_nodes(g)) {
    const Node& n = g.nodes[id];
    for (const Dim& d : n.shape) collect_vars(d, vars);
    if (n.op == PrimOp::Slice || n.op == PrimOp::Pad) {
      collect_vars(n.start, vars);
      collect_vars(n.end, vars);
    }
  }
  for (const Slot& s : slots)
    for (const Dim& d : s.node->shape) collect_vars(d, vars);

  DimBindings dims;
  auto mismatch = [&](const Slot& s, size_t axis, const std::string& why) {
    bad(std::string(s.kind) + " '" + s.node->name + "' has shape " + ints(s.data->shape()) + ", declared " +
        shape_string(s.node->shape) + " at " + where_string(s.node->loc) + ": axis " + std::to_string(axis) +
        " " + why);
  };
  auto bind_var = [&](const std::string& var, int64_t value, const Slot& s, size_t axis) {
    const VarRange r = vars.count(var) ? vars.at(var) : VarRange{0, INT64_MAX, 1};
    if (value < r.lo || value > r.hi)
      mismatch(s, axis,
               "gives dim " + var + " = " + std::to_string(value) + ", outside its range [" +
                   std::to_string(r.lo) + ", " + std::to_string(r.hi) + "]");
    if (value % r.multiple != 0)
      mismatch(s, axis,
               "gives dim " + var + " = " + std::to_string(value) + ", not a multiple of " +
                   std::to_string(r.multiple));
    dims[var] = value;
  };
  // Solve dims from shapes: constants and a*V + c first, then anything whose variables
  // are bound, repeating while progress is made.
  std::vector<std::pair<size_t, size_t>> pending;  // (slot, axis)
  for (size_t i = 0; i < slots.size(); ++i)
    for (size_t a = 0; a < slots[i].node->shape.size(); ++a) pending.emplace_back(i, a);
  bool progress = true;
  while (progress && !pending.empty()) {
    progress = false;
    std::vector<std::pair<size_t, size_t>> rest;
    for (auto [i, a] : pending) {
      const Slot& s = slots[i];
      const Dim& d = s.node->shape[a];
      const int64_t v = s.data->shape()[a];
      std::map<std::string, VarRange> dv;
      collect_vars(d, dv);
      bool all_bound = true;
      for (const auto& [name, r] : dv) all_bound = all_bound && dims.count(name);
      if (all_bound) {
        const int64_t expect = d.evaluate(dims);
        if (expect != v) {
          std::string why = "is " + std::to_string(v) + ", expected " + std::to_string(expect);
          if (!d.is_constant()) why += " (" + d.to_string() + ")";
          mismatch(s, a, why);
        }
        progress = true;
        continue;
      }
      if (auto lin = as_linear(d)) {
        const int64_t num = v - lin->constant;
        if (num % lin->coeff != 0)
          mismatch(s, a, "is " + std::to_string(v) + ", not of the form " + d.to_string());
        bind_var(lin->var, num / lin->coeff, s, a);
        progress = true;
        continue;
      }
      rest.emplace_back(i, a);
    }
    pending = std::move(rest);
  }
  if (!pending.empty()) {
    const Slot& s = slots[pending[0].first];
    mismatch(s, pending[0].second,
             "(" + s.node->shape[pending[0].second].to_string() + ") cannot be solved from the input shapes");
  }
  for (const auto& [name, r] : vars)
    if (!dims.count(name))
      bad("dim '" + name + "' cannot be inferred: no input or param shape determines it");

  for (const Guard& gd : g.guards) {
    std::map<std::string, VarRange> gv;
    collect_vars(gd.a, gv);
    collect_vars(gd.b, gv);
    bool bound = true;
    for (const auto& [name, r] : gv) bound = bound && dims.count(name);
    if (!bound) continue;  // about dims no live node uses
    const int64_t a = gd.a.evaluate(dims), b = gd.b.evaluate(dims);
    if (gd.less_equal ? a <= b : a == b) continue;
    std::string with;
    for (const auto& [name, r] : gv)
      with += (with.empty() ? "" : ", ") + name + "=" + std::to_string(dims.at(name));
    throw RuntimeError(gd.message + " with " + with + ": " + std::to_string(a) +
                       (gd.less_equal ? " > " : " != ") + std::to_string(b));
  }
  return dims;
}

}  // namespace luminal::detail
