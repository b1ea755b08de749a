// Callable: param binding and validated calls over an immutable compiled program.
#include "luminal/callable.hpp"

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <new>
#include <stdexcept>

#include "backends/cpu/cpu_executable.hpp"
#include "dist/param_block.hpp"
#include "graph/diagnostics.hpp"
#include "runtime/call_control.hpp"
#include "runtime/executable.hpp"

namespace luminal {

using namespace detail;

namespace {
const CallableState& state_of(const std::shared_ptr<CallableState>& s) {
  if (!s) throw RuntimeError("[call] this Callable is empty: make it with luminal::compile()");
  return *s;
}

std::string dims_text(const DimBindings& dims) {
  std::string s;
  for (const auto& [name, v] : dims) s += (s.empty() ? "" : ", ") + name + " = " + std::to_string(v);
  return s.empty() ? "constant dims" : s;
}

bool overlap(const HostTensor& a, const HostTensor& b) {
  const auto a0 = reinterpret_cast<uintptr_t>(a.data()), b0 = reinterpret_cast<uintptr_t>(b.data());
  return a.nbytes() && b.nbytes() && a0 < b0 + b.nbytes() && b0 < a0 + a.nbytes();
}

// Whether an entry of `outputs` that the call would write in place shares memory with an
// input (then true) or with another such output (RuntimeError). Allocates nothing.
bool outputs_alias_inputs(const GraphImpl& g, const std::map<std::string, HostTensor>& inputs,
                          const std::map<std::string, HostTensor>& outputs) {
  bool aliased = false;
  for (size_t i = 0; i < g.outputs.size(); ++i) {
    auto it = outputs.find(g.outputs[i].first);
    if (it == outputs.end() || !it->second.is_writable()) continue;
    for (const auto& [name, in] : inputs)
      if (overlap(it->second, in)) aliased = true;
    for (size_t j = i + 1; j < g.outputs.size(); ++j) {
      auto other = outputs.find(g.outputs[j].first);
      if (other != outputs.end() && other->second.is_writable() && overlap(it->second, other->second))
        throw RuntimeError("[call] outputs '" + it->first + "' and '" + other->first +
                           "' share memory: each output needs its own buffer");
    }
  }
  return aliased;
}

// Hands computed tensors to the caller's map: copied into a caller's tensor of the same
// dtype and shape that can be written (the caller keeps its buffer), moved in otherwise.
void deliver(std::map<std::string, HostTensor>&& computed, std::map<std::string, HostTensor>& outputs) {
  for (auto& [name, t] : computed) {
    auto it = outputs.find(name);
    if (it != outputs.end() && it->second.dtype() == t.dtype() && it->second.shape() == t.shape() &&
        it->second.is_writable()) {
      if (t.nbytes()) std::memcpy(it->second.mutable_data(), t.data(), t.nbytes());
    } else {
      outputs.insert_or_assign(name, std::move(t));
    }
  }
}

std::string ints(const std::vector<int64_t>& s) {
  std::string t = "(";
  for (size_t i = 0; i < s.size(); ++i) t += (i ? ", " : "") + std::to_string(s[i]);
  return t + ")";
}
}  // namespace

void Callable::bind(const std::string& name, HostTensor value) {
  const CallableState& st = state_of(state_);
  const GraphImpl& g = *st.graph;
  const Node* node = nullptr;
  for (uint32_t id : g.params)
    if (g.nodes[id].name == name) node = &g.nodes[id];
  if (!node) {
    for (uint32_t id : g.inputs)
      if (g.nodes[id].name == name)
        throw RuntimeError("[bind] '" + name + "' is an input, not a param: pass it on each call");
    std::string names;
    for (uint32_t id : g.params) names += (names.empty() ? "" : ", ") + g.nodes[id].name;
    throw RuntimeError("[bind] unknown param '" + name +
                       "'; the params are: " + (names.empty() ? "(none)" : names));
  }
  if (value.dtype() != node->dtype)
    throw RuntimeError("[bind] param '" + name + "' is " + std::string(dtype_name(value.dtype())) + " " +
                       ints(value.shape()) + ", declared " + std::string(dtype_name(node->dtype)) + " " +
                       shape_string(node->shape));
  if (auto blk = st.param_blocks.find(name); blk != st.param_blocks.end() && value.shape() != dist::block_dims(blk->second)) {
    // This rank stores only its block of the weight (docs/distributed.md): a whole weight
    // is bound as a copy of the block; any other shape is an error.
    std::vector<int64_t> whole;
    for (const Dim& d : node->shape) whole.push_back(d.as_constant().value_or(-1));
    if (value.shape() != whole)
      throw RuntimeError("[bind] param '" + name + "' has shape " + ints(value.shape()) + "; compiled for " +
                         std::to_string(st.report.ranks) + " ranks, this rank stores only its block " +
                         dist::block_text(blk->second, whole) + ": bind that block or the whole weight");
    value = dist::copy_block(value, blk->second);
  }
  const bool block = st.param_blocks.count(name) > 0;
  bool ok = value.shape().size() == node->shape.size();
  for (size_t i = 0; ok && i < value.shape().size() && !block; ++i) {
    // Symbolic dims of a param are checked at call time, once the dims are bound.
    if (auto c = node->shape[i].as_constant()) ok = *c == value.shape()[i];
  }
  if (!ok)
    throw RuntimeError("[bind] param '" + name + "' has shape " + ints(value.shape()) + ", declared " +
                       shape_string(node->shape));
  // A bound param must outlive the caller's memory: views are copied, unless an owner
  // keeps their memory alive (a mapped weights file).
  if (value.is_view() && !value.has_owner())
    value = HostTensor::from_bytes(value.dtype(), value.shape(), {value.data(), value.nbytes()});
  auto p = std::make_shared<const HostTensor>(std::move(value));
  std::lock_guard<std::mutex> lock(state_->mu);
  state_->params[name] = std::move(p);
  // Published as a new snapshot: calls running now keep theirs (and the old tensor).
  state_->published = std::make_shared<const CallableState::ParamMap>(state_->params);
}

void Callable::bind(const std::map<std::string, HostTensor>& params) {
  // Each one validated and staged on a scratch Callable sharing nothing, then published
  // together: a call sees all of the new values or none.
  const CallableState& st = state_of(state_);
  auto staging = std::make_shared<CallableState>();
  staging->graph = st.graph;
  staging->param_blocks = st.param_blocks;
  staging->report.ranks = st.report.ranks;
  Callable scratch(staging);
  for (const auto& [name, value] : params) scratch.bind(name, value);
  std::lock_guard<std::mutex> lock(state_->mu);
  for (auto& [name, t] : staging->params) state_->params[name] = std::move(t);
  state_->published = std::make_shared<const CallableState::ParamMap>(state_->params);
}

namespace {

// Status of a failed call, with the code of the exception that stopped it.
Status failed(const std::exception& e) {
  Status s{false, e.what(), StatusCode::error};
  if (dynamic_cast<const CancelledError*>(&e)) s.code = StatusCode::cancelled;
  if (dynamic_cast<const DeadlineExceededError*>(&e)) s.code = StatusCode::deadline_exceeded;
  return s;
}

std::map<std::string, HostTensor> call(const CallableState& st, const std::map<std::string, HostTensor>& inputs,
                                       const CallControl& ctl) {
  if (!st.exe || !st.not_runnable.empty()) throw RuntimeError("[call] " + st.not_runnable);
  const std::shared_ptr<const CallableState::ParamMap> params = st.params_for_call();
  const DimBindings dims = validate_call(*st.graph, inputs, *params, st.param_blocks);
  std::map<std::string, const HostTensor*> tensors;
  for (const auto& [name, t] : inputs) tensors[name] = &t;
  for (const auto& [name, t] : *params) tensors[name] = t.get();
  try {
    if (const auto* cpu = dynamic_cast<const cpu::CpuExecutable*>(st.exe.get())) {
      std::map<std::string, HostTensor> out;
      cpu->run_into(dims, tensors, out, ctl);
      return out;
    }
    ctl.check("before the call started");
    return st.exe->run_with_params(dims, tensors, *params);
  } catch (const std::bad_alloc&) {
    // Sizes follow the caller's dims: running out of memory is a bad call, reported as one.
    throw RuntimeError("[call] out of memory running the program with " + dims_text(dims));
  } catch (const std::length_error&) {
    throw RuntimeError("[call] a buffer size is too large running the program with " + dims_text(dims));
  }
}

}  // namespace

std::map<std::string, HostTensor> Callable::operator()(
    const std::map<std::string, HostTensor>& inputs) const {
  return call(state_of(state_), inputs, CallControl{});
}

std::map<std::string, HostTensor> Callable::operator()(const std::map<std::string, HostTensor>& inputs,
                                                       const CallOptions& options) const {
  return call(state_of(state_), inputs, CallControl(options));
}

Status Callable::run(const std::map<std::string, HostTensor>& inputs,
                     std::map<std::string, HostTensor>& outputs) const noexcept {
  return run(inputs, outputs, CallOptions{});
}

Status Callable::run(const std::map<std::string, HostTensor>& inputs,
                     std::map<std::string, HostTensor>& outputs, const CallOptions& options) const noexcept {
  try {
    const CallableState& st = state_of(state_);
    if (!st.exe || !st.not_runnable.empty()) throw RuntimeError("[call] " + st.not_runnable);
    // Generated code takes its buffers as restrict pointers: an output written in place
    // over an input's memory would read values it has already overwritten. Such a call
    // computes into fresh tensors and copies them over afterwards (an in-place update
    // such as x = f(x) works); two outputs sharing memory are refused.
    if (outputs_alias_inputs(*st.graph, inputs, outputs)) {
      std::map<std::string, HostTensor> fresh;
      const Status s = run(inputs, fresh, options);
      if (!s) return s;
      deliver(std::move(fresh), outputs);
      return {};
    }
    const CallControl ctl(options);
    // Generated code writes matching caller outputs in place: no copy, no output allocation.
    if (const auto* direct = dynamic_cast<const cpu::CpuExecutable*>(st.exe.get())) {
      // Steady state: validated in place, nothing allocated.
      const std::shared_ptr<const CallableState::ParamMap> params = st.params_for_call();
      if (direct->try_run_fast(inputs, *params, outputs, ctl)) return {};
      const DimBindings dims = validate_call(*st.graph, inputs, *params, st.param_blocks);
      std::map<std::string, const HostTensor*> tensors;
      for (const auto& [name, t] : inputs) tensors[name] = &t;
      for (const auto& [name, t] : *params) tensors[name] = t.get();
      direct->run_into(dims, tensors, outputs, ctl);
      return {};
    }
    std::map<std::string, HostTensor> result = call(st, inputs, ctl);
    deliver(std::move(result), outputs);
    return {};
  } catch (const std::exception& e) {
    return failed(e);
  } catch (...) {
    return Status{false, "[call] unknown exception", StatusCode::error};
  }
}

namespace {

// A view of device memory, for validation (which reads shapes, never data) and for the
// emulator, whose device memory is the host's. `what`: "input" / "output".
HostTensor device_view(const std::string& name, const DeviceTensor& t, const char* what) {
  for (int64_t d : t.shape)
    if (d < 0) throw RuntimeError("[run_device] " + std::string(what) + " '" + name + "' has a negative dim");
  try {
    return HostTensor::view(t.dtype, t.shape, reinterpret_cast<void*>(t.address));
  } catch (const RuntimeError&) {
    throw RuntimeError("[run_device] " + std::string(what) + " '" + name + "' has a null address and " +
                       std::to_string(t.shape.size()) + " dims with elements");
  }
}

// The outputs a device call writes: exactly the program's, with the shapes the dims imply,
// overlapping neither each other nor an input (kernels read inputs while they write).
void check_device_outputs(const GraphImpl& g, const DimBindings& dims,
                          const std::map<std::string, HostTensor>& inputs,
                          const std::map<std::string, HostTensor>& outputs) {
  for (const auto& [name, t] : outputs) {
    bool known = false;
    for (const auto& [out, id] : g.outputs) known = known || out == name;
    if (!known) throw RuntimeError("[run_device] unknown output '" + name + "'");
  }
  for (const auto& [name, id] : g.outputs) {
    const Node& n = g.nodes[id];
    std::vector<int64_t> want;
    for (const Dim& d : n.shape) want.push_back(d.evaluate(dims));
    const std::string declared = std::string(dtype_name(n.dtype)) + " " + ints(want);
    auto it = outputs.find(name);
    if (it == outputs.end())
      throw RuntimeError("[run_device] missing output '" + name +
                         "': the call writes it into caller memory, " + declared);
    if (it->second.dtype() != n.dtype || it->second.shape() != want)
      throw RuntimeError("[run_device] output '" + name + "' is " +
                         std::string(dtype_name(it->second.dtype())) + " " + ints(it->second.shape()) +
                         ", the call makes " + declared);
  }
  for (auto a = outputs.begin(); a != outputs.end(); ++a) {
    for (const auto& [name, in] : inputs)
      if (overlap(a->second, in))
        throw RuntimeError("[run_device] output '" + a->first + "' overlaps input '" + name +
                           "': a device call needs separate buffers");
    for (auto b = std::next(a); b != outputs.end(); ++b)
      if (overlap(a->second, b->second))
        throw RuntimeError("[run_device] outputs '" + a->first + "' and '" + b->first + "' share memory");
  }
}

}  // namespace

void detail::Executable::run_device(const DimBindings&, const std::map<std::string, DeviceTensor>&,
                                    const ParamMap&, const std::map<std::string, DeviceTensor>&,
                                    void*) const {
  throw RuntimeError("[run_device] this program runs on the host: call run() or operator()");
}

Status Callable::run_device(const std::map<std::string, DeviceTensor>& inputs,
                            const std::map<std::string, DeviceTensor>& outputs, void* stream) const noexcept {
  try {
    const CallableState& st = state_of(state_);
    if (!st.exe || !st.not_runnable.empty()) throw RuntimeError("[run_device] " + st.not_runnable);
    if (st.target.kind() != Target::Kind::cuda && st.target.kind() != Target::Kind::hip)
      throw RuntimeError("[run_device] target " + st.target.to_string() +
                         " has no device memory: call run() or operator()");
    std::map<std::string, HostTensor> in, out;
    for (const auto& [name, t] : inputs) in.emplace(name, device_view(name, t, "input"));
    for (const auto& [name, t] : outputs) out.emplace(name, device_view(name, t, "output"));
    const std::shared_ptr<const CallableState::ParamMap> params = st.params_for_call();
    const DimBindings dims = validate_call(*st.graph, in, *params, st.param_blocks);
    check_device_outputs(*st.graph, dims, in, out);
    if (st.target.is_emulated()) {  // the emulator's device is the host
      std::map<std::string, HostTensor> got = out;
      if (Status s = run(in, got); !s) return s;
      // Outputs the call wrote elsewhere (a second name for one value, a pass-through).
      for (const auto& [name, t] : got) {
        const DeviceTensor& dst = outputs.at(name);
        if (reinterpret_cast<std::uint64_t>(t.data()) != dst.address && t.nbytes())
          std::memcpy(reinterpret_cast<void*>(dst.address), t.data(), t.nbytes());
      }
      return {};
    }
    st.exe->run_device(dims, inputs, *params, outputs, stream);
    return {};
  } catch (const std::exception& e) {
    return failed(e);
  } catch (...) {
    return Status{false, "[run_device] unknown exception", StatusCode::error};
  }
}

int64_t Callable::memory_held() const {
  const auto* cpu = dynamic_cast<const cpu::CpuExecutable*>(state_of(state_).exe.get());
  return cpu ? static_cast<int64_t>(cpu->memory_held()) : 0;
}

void Callable::trim_memory() const {
  if (const auto* cpu = dynamic_cast<const cpu::CpuExecutable*>(state_of(state_).exe.get()))
    cpu->trim_memory();
}

const CompileReport& Callable::report() const { return state_of(state_).report; }
const Target& Callable::target() const { return state_of(state_).target; }

std::vector<std::string> Callable::input_names() const {
  std::vector<std::string> out;
  const GraphImpl& g = *state_of(state_).graph;
  for (uint32_t id : g.inputs) out.push_back(g.nodes[id].name);
  return out;
}
std::vector<std::string> Callable::param_names() const {
  std::vector<std::string> out;
  const GraphImpl& g = *state_of(state_).graph;
  for (uint32_t id : g.params) out.push_back(g.nodes[id].name);
  return out;
}
ParamRegion Callable::param_region(const std::string& name) const {
  const CallableState& st = state_of(state_);
  const GraphImpl& g = *st.graph;
  for (uint32_t id : g.params) {
    if (g.nodes[id].name != name) continue;
    if (auto it = st.param_regions.find(name); it != st.param_regions.end()) return it->second;
    ParamRegion r;
    for (const Dim& d : g.nodes[id].shape) {
      r.start.push_back(0);
      r.end.push_back(d.as_constant().value_or(-1));
    }
    return r;
  }
  throw RuntimeError("[param_region] '" + name + "' is not a param of this program");
}

std::vector<std::string> Callable::output_names() const {
  std::vector<std::string> out;
  for (const auto& [name, id] : state_of(state_).graph->outputs) out.push_back(name);
  return out;
}

std::string CompileReport::to_string() const {
  char buf[512];
  std::snprintf(
      buf, sizeof buf,
      "target %s: %lld kernels from %lld primitive ops; e-graph %lld nodes / %lld classes after %lld "
      "iterations (%s)%s; compiled in %.3f s; estimated %.3g s per call",
      target.c_str(), static_cast<long long>(kernels), static_cast<long long>(primitive_ops),
      static_cast<long long>(egraph_nodes), static_cast<long long>(egraph_classes),
      static_cast<long long>(iterations), stop_reason.c_str(), plan_cached ? " (plan from the plan cache)" : "",
      compile_seconds, estimated_seconds);
  std::string s = buf;
  if (!codegen.empty()) s += "; codegen " + codegen;
  if (ranks > 1) s += "; " + sharding;
  for (const KernelResources& k : kernel_resources)
    s += "\n  " + k.name + ": " + std::to_string(k.registers) + " registers, " + std::to_string(k.shared_bytes) +
         " B shared, " + std::to_string(k.spill_bytes) + " B spilled" + (k.spill_bytes ? " (SPILL: cost-model error)" : "");
  return s;
}

}  // namespace luminal
