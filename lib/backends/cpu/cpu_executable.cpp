// Plan -> kernel::Program -> one C TU -> JIT -> calls in plan order (see the header).
// The parts, one purpose each: cpu_program (plan -> kernel IR), arena_layout (lifetimes
// and per-binding layouts), arena_pool (per-call scratch), call_binding (the allocation-
// free call check), cpu_env (diagnostic environment variables); this file renders, loads
// the code and runs it.
#include "backends/cpu/cpu_executable.hpp"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "backends/cpu/arena_layout.hpp"
#include "backends/cpu/arena_pool.hpp"
#include "backends/cpu/c_renderer.hpp"
#include "backends/cpu/call_binding.hpp"
#include "backends/cpu/cpu_env.hpp"
#include "backends/cpu/cpu_program.hpp"
#include "dist/param_block.hpp"
#include "backends/cpu/kernel_call.hpp"
#include "backends/reference/interpreter.hpp"
#include "dist/collectives.hpp"
#include "luminal/error.hpp"
#include "runtime/output_pool.hpp"

namespace luminal::cpu {

namespace {

// A generated gather never reads outside its table; an id out of range is the caller's
// error, reported before the kernel runs with the interpreter's message.
void check_gather_ids(const kernel::Gather& g, const void* ids, const std::array<int64_t, 2>& dims) {
  const auto* id = static_cast<const int32_t*>(ids);
  for (int64_t i = 0; i < dims[0]; ++i)
    if (id[i] < 0 || id[i] >= dims[1])
      throw RuntimeError(kernel::gather_id_error(g.op_name, id[i], i, dims[1]));
}

Jit& jit_for(const std::string& dir) {
  if (dir.empty()) return Jit::global();
  static std::mutex mu;
  static std::map<std::string, std::unique_ptr<Jit>> jits;
  std::lock_guard<std::mutex> lock(mu);
  auto& j = jits[dir];
  if (!j) {
    JitConfig c = JitConfig::from_env();
    c.cache_dir = dir;
    j = std::make_unique<Jit>(c);
  }
  return *j;
}

// LUMINAL_DUMP_C: the generated translation unit plus the kernel IR, for reading and profiling.
void dump_source(const std::string& path, const std::string& source, const kernel::Program& prog) {
  if (FILE* f = std::fopen(path.c_str(), "w")) {
    std::fputs(source.c_str(), f);
    std::fputs(("\n/* kernel IR\n" + kernel::to_string(prog) + "*/\n").c_str(), f);
    std::fclose(f);
  }
}

// The compiled code: the prebuilt object of luminal::load (checked against the source
// it was built from, and for every kernel), else the JIT (memory cache, disk cache, or
// the C compiler; a cached object without every kernel is evicted and rebuilt).
std::shared_ptr<const JitLibrary> load_library(const std::string& source, const std::string& source_hash,
                                               const std::vector<std::string>& kernels, const CpuBuildOptions& opt) {
  if (opt.prebuilt_so_path.empty() && opt.prebuilt_so_bytes.empty())
    return (opt.jit ? *opt.jit : jit_for(opt.cache_dir)).compile(source, kernels);
  if (opt.prebuilt_source_hash != source_hash)
    throw CompileError("[load] the saved program's code does not match this build of Luminal (source hash " +
                       opt.prebuilt_source_hash + ", rendered " + source_hash +
                       "): recompile and save it again");
  auto lib = !opt.prebuilt_so_bytes.empty()
                 ? JitLibrary::open_bytes(opt.prebuilt_so_bytes, "[load] cannot load the saved code")
                 : JitLibrary::open(opt.prebuilt_so_path, "[load] cannot load the saved code " + opt.prebuilt_so_path);
  for (const auto& name : kernels)
    if (!lib->has_symbol(name))
      throw CompileError("[load] the saved code lacks the kernel '" + name + "': the file is not this program's");
  return lib;
}

}  // namespace

struct CpuExecutable::Impl {
  Impl(const compiler::KernelPlan& p, std::shared_ptr<const detail::GraphImpl> g, const CpuEnv& env,
       const CpuBuildOptions& opt)
      : graph(std::move(g)),
        // Another renderer (the emulated GPU targets') gets the lowering every backend takes.
        lowered(lower_plan(p, opt.render ? opt.render_lower : cpu_lower_options(), opt.param_blocks)),
        arena(arena_buffers(p, lowered)),
        layouts(lowered.prog, arena),
        arenas(lowered.prog.buffers.size(), lowered.prog.symbols.size(), opt.arena_limits),
        binding(graph.get(), p, lowered.prog, lowered.interpreted == 0),
        pool(opt.pool ? opt.pool : detail::WorkerPool::shared()),
        threads(opt.threads),
        profile(env.profile),
        profile_all(env.profile_all) {
    if (profile) kernel_seconds.assign(lowered.prog.kernels.size(), 0);
  }

  /// Threads of a call: its own request, else the executable's default, else all of the
  /// pool (the caller plus every worker); never more than that.
  int call_threads(const detail::CallControl& ctl) const {
    const int most = pool->capacity() + 1;
    const int want = ctl.threads > 0 ? ctl.threads : threads > 0 ? threads : most;
    return want < most ? want : most;
  }

  std::shared_ptr<const detail::GraphImpl> graph;
  LoweredPlan lowered;
  ArenaBuffers arena;
  LayoutCache layouts;
  mutable ArenaPool arenas;
  CallBinding binding;
  std::shared_ptr<detail::WorkerPool> pool;
  int threads = 0;
  std::shared_ptr<const JitLibrary> lib;
  std::vector<KernelFn> fns;  // per kernel of lowered.prog
  std::shared_ptr<Communicator> comm;  // for collective steps
  // Storage of the outputs operator() hands back, recycled once the caller drops them.
  std::shared_ptr<detail::OutputPool> output_pool = detail::OutputPool::create();
  // LUMINAL_CPU_PROFILE=1: per-kernel wall time summed over calls, printed at exit
  // (diagnostics only; not synchronized between concurrent calls).
  bool profile = false;
  bool profile_all = false;
  mutable std::vector<double> kernel_seconds;
};

CpuExecutable::CpuExecutable(std::shared_ptr<const compiler::KernelPlan> plan,
                             std::shared_ptr<const detail::GraphImpl> graph, const CpuBuildOptions& opt)
    : plan_(std::move(plan)) {
  const CpuEnv env = CpuEnv::from_env();
  const auto t0 = std::chrono::steady_clock::now();
  impl_ = std::make_unique<Impl>(*plan_, std::move(graph), env, opt);
  Impl& m = *impl_;
  m.comm = opt.communicator;
  const kernel::Program& prog = m.lowered.prog;
  info_.generated_kernels = static_cast<int64_t>(prog.kernels.size());
  info_.interpreted = m.lowered.interpreted;
  info_.interpreted_why = m.lowered.interpreted_why;
  info_.param_blocks = stored_blocks(prog);
  if (!prog.kernels.empty()) {
    CProgram cp = opt.render ? opt.render(prog) : render_c(prog);
    source_ = std::move(cp.source);
    info_.source_hash = hash_hex(source_);
    if (!env.dump_c.empty()) dump_source(env.dump_c, source_, prog);
    m.lib = load_library(source_, info_.source_hash, cp.kernels, opt);
    for (const auto& name : cp.kernels) m.fns.push_back(m.lib->function<KernelFn>(name));
  }
  info_.jit_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  // The arena is reported when its size is fixed (no symbols); with symbols it depends on
  // the call.
  if (prog.symbols.empty()) {
    const std::shared_ptr<const Layout> l = m.layouts.get({});
    info_.arena_bytes = static_cast<int64_t>(l->arena_bytes);
    info_.intermediate_bytes = static_cast<int64_t>(l->total_bytes);
  }
}

CpuExecutable::~CpuExecutable() {
  const Impl& m = *impl_;
  if (!m.profile) return;
  double total = 0;
  for (double t : m.kernel_seconds) total += t;
  std::fprintf(stderr, "cpu profile: %zu kernels, %.3f s total\n", m.kernel_seconds.size(), total);
  for (size_t k = 0; k < m.kernel_seconds.size(); ++k)
    if (m.profile_all || m.kernel_seconds[k] > 0.01 * total)
      std::fprintf(stderr, "  %-10s %6.1f%%  %.6f s\n", m.lowered.prog.kernels[k].name.c_str(),
                   100 * m.kernel_seconds[k] / total, m.kernel_seconds[k]);
}

std::string CpuExecutable::library_path() const { return impl_->lib ? impl_->lib->path() : std::string(); }
std::string CpuExecutable::library_bytes() const { return impl_->lib ? impl_->lib->bytes() : std::string(); }

size_t CpuExecutable::memory_held() const { return impl_->arenas.bytes_held(); }
void CpuExecutable::trim_memory() const { impl_->arenas.trim(true); }

std::map<std::string, HostTensor> CpuExecutable::run(
    const DimBindings& dims, const std::map<std::string, const HostTensor*>& tensors) const {
  std::map<std::string, HostTensor> out;
  run_into(dims, tensors, out);
  return out;
}

void CpuExecutable::run_into(const DimBindings& dims, const std::map<std::string, const HostTensor*>& tensors,
                             std::map<std::string, HostTensor>& outputs,
                             const detail::CallControl& ctl) const {
  const Impl& m = *impl_;
  const compiler::KernelPlan& p = *plan_;
  const auto& names = m.binding.var_names();
  std::vector<int64_t> vals(names.size());
  for (size_t i = 0; i < vals.size(); ++i) {
    auto it = dims.find(names[i]);
    if (it == dims.end()) throw RuntimeError("[cpu] dim '" + names[i] + "' is not bound");
    vals[i] = it->second;
  }
  std::vector<const std::byte*> leaf(p.leaf_name.size(), nullptr);
  std::vector<HostTensor> blocks;  // whole params stored as blocks: their blocks, for this call
  for (size_t v = 0; v < p.leaf_name.size(); ++v) {
    if (p.leaf_name[v].empty()) continue;
    auto it = tensors.find(p.leaf_name[v]);
    if (it == tensors.end() || !it->second)
      throw RuntimeError("[compiled program] no data for '" + p.leaf_name[v] + "'");
    leaf[v] = it->second->data();
    const kernel::BufferBlock* b = m.lowered.prog.block(static_cast<int>(v));
    if (b && it->second->shape() != b->dims) {
      // A caller of run() with the whole weight (translation validation): its block.
      ParamRegion r{b->start, b->start};
      for (size_t a = 0; a < r.end.size(); ++a) r.end[a] += b->dims[a];
      if (!dist::block_inside(r, it->second->shape()))
        throw RuntimeError("[compiled program] param '" + p.leaf_name[v] + "' is stored as its block " +
                           dist::block_text(r, it->second->shape()) + " on this rank; it was given neither");
      blocks.reserve(p.leaf_name.size());
      blocks.push_back(dist::copy_block(*it->second, r));
      leaf[v] = blocks.back().data();
    }
  }
  execute(vals.data(), leaf.data(), &dims, outputs, ctl);
}

bool CpuExecutable::try_run_fast(const std::map<std::string, HostTensor>& inputs,
                                 const std::map<std::string, std::shared_ptr<const HostTensor>>& params,
                                 std::map<std::string, HostTensor>& outputs,
                                 const detail::CallControl& ctl) const {
  const Impl& m = *impl_;
  thread_local std::vector<int64_t> vals;
  thread_local std::vector<const std::byte*> leaf;
  vals.assign(m.binding.var_names().size(), 0);
  leaf.assign(plan_->leaf_name.size(), nullptr);
  if (!m.binding.bind(inputs, params, vals.data(), leaf.data())) return false;
  execute(vals.data(), leaf.data(), nullptr, outputs, ctl);
  return true;
}

void CpuExecutable::execute(const int64_t* var_values, const std::byte* const* leaf_data,
                            const DimBindings* dims, std::map<std::string, HostTensor>& outputs,
                            const detail::CallControl& ctl) const {
  const Impl& m = *impl_;
  const compiler::KernelPlan& p = *plan_;
  const kernel::Program& prog = m.lowered.prog;
  const auto& var_names = m.binding.var_names();
  const auto& sym_var = m.binding.symbol_var();

  // symbols -> layout (cached per binding) -> arena
  thread_local std::vector<int64_t> key;
  key.resize(prog.symbols.size());
  for (size_t i = 0; i < prog.symbols.size(); ++i) key[i] = var_values[sym_var[i]];
  const std::shared_ptr<const Layout> lay_ref = m.layouts.get(key);
  const Layout& lay = *lay_ref;
  const int threads = m.call_threads(ctl);
  ctl.check_lazy([] { return std::string("before it started"); });
  ArenaLease arena(m.arenas, m.arenas.acquire(lay.call_bytes(threads), ctl));
  for (size_t i = 0; i < key.size(); ++i) arena->syms[i] = key[i];

  std::vector<void*>& ptr = arena->ptrs;
  for (size_t b = 0; b < prog.buffers.size(); ++b)
    ptr[b] = lay.offset[b] != kNotInArena ? static_cast<void*>(arena->mem.get() + lay.offset[b]) : nullptr;
  for (size_t v = 0; v < p.leaf_name.size(); ++v)
    if (!p.leaf_name[v].empty())
      ptr[v] = const_cast<std::byte*>(leaf_data[v]);  // kernels never store to leaves
  // State buffers start every call at zero. The kernels leave them zero, but a pooled
  // arena may have held another binding's layout (the device runtime zeroes its buffers
  // once, when it allocates a binding's).
  for (size_t b = 0; b < prog.buffers.size(); ++b)
    if (prog.buffers[b].role == kernel::BufferRole::State && ptr[b])
      std::memset(ptr[b], 0, static_cast<size_t>(lay.elements[b]) * dtype_size(prog.buffers[b].dtype));
  // Params stored packed (kernel::Program::packs, the emulated GPU lowering's): copied
  // into their pack in this call's arena, as the device keeps them resident side by side.
  for (const kernel::ParamPack& pk : prog.packs) {
    auto* to = static_cast<std::byte*>(ptr[static_cast<size_t>(pk.buffer)]);
    for (int mb : pk.members) {
      const size_t bytes = static_cast<size_t>(lay.elements[static_cast<size_t>(mb)]) *
                           dtype_size(prog.buffers[static_cast<size_t>(mb)].dtype);
      std::memcpy(to, ptr[static_cast<size_t>(mb)], bytes);
      to += bytes;
    }
  }
  auto dim_value = [&](const Dim& d) {
    int64_t x = 0;
    if (!eval_dim(d, var_names, var_values, x))
      throw RuntimeError("[cpu] cannot evaluate dim " + d.to_string());
    return x;
  };
  auto out_shape = [&](uint32_t v) {
    std::vector<int64_t> s;
    for (const Dim& d : m.lowered.value_shape[v]) s.push_back(dim_value(d));
    return s;
  };
  auto shape_is = [&](const HostTensor& t, uint32_t v) {
    const auto& want = m.lowered.value_shape[v];
    if (t.shape().size() != want.size()) return false;
    for (size_t i = 0; i < want.size(); ++i)
      if (t.shape()[i] != dim_value(want[i])) return false;
    return true;
  };
  const std::vector<int>& direct_output = m.lowered.direct_output;
  // Outputs written in place: reuse a matching writable entry, else make one.
  for (size_t o = 0; o < p.outputs.size(); ++o) {
    const uint32_t v = p.outputs[o].second;
    if (direct_output[v] != static_cast<int>(o)) continue;
    const std::string& name = p.outputs[o].first;
    const DType dt = prog.buffers[v].dtype;
    auto it = outputs.find(name);
    const bool reuse = it != outputs.end() && it->second.dtype() == dt && it->second.is_writable() &&
                       shape_is(it->second, v);
    if (!reuse) it = outputs.insert_or_assign(name, m.output_pool->take(dt, out_shape(v))).first;
    ptr[v] = it->second.mutable_data();
  }

  // The call's team (declared after the arena: it finishes, so every chunk is done,
  // before the arena goes back, even when a kernel throws).
  detail::CallTeam team(m.pool.get(), threads);
  KernelCall call;
  call.team = &team;
  call.scratch = arena->mem.get() + lay.arena_bytes;
  call.scratch_bytes = lay.scratch_per_thread;
  call.scratch_threads = lay.scratch_per_thread ? threads : 0;
  const LmRuntime* rt = runtime_table();
  for (size_t s = 0; s < m.lowered.steps.size(); ++s) {
    const PlanStep& es = m.lowered.steps[s];
    if (es.collective) {  // a host step between generated kernels
      if (!m.comm) throw RuntimeError("[cpu] the program has collectives: it runs with the communicator it was compiled for");
      ctl.check_lazy([&] { return "before plan step " + std::to_string(s + 1) + " (collective)"; });
      // The collective runs here, on the caller: the kernels issued before it (a tail job
      // the caller did not wait for may still run on the workers) must have finished
      // writing its input and reading the memory its result overwrites.
      team.barrier();
      const auto& st = p.steps[s];
      dist::run_collective(*m.comm, *st.spec, out_shape(st.args.at(0)), ptr[st.args[0]], ptr[st.result]);
      continue;
    }
    if (!es.interpreted) {
      for (int k = es.k0; k < es.k1; ++k) {
        const auto kk = static_cast<size_t>(k);
        // Deadline and cancellation, between kernels (the kernels issued so far finish
        // before the call returns: the team's destructor waits for them).
        ctl.check_lazy([&] {
          return "before kernel " + std::to_string(k + 1) + " of " + std::to_string(prog.kernels.size()) +
                 " (" + prog.kernels[kk].name + ")";
        });
        if (lay.wait_before[kk]) team.barrier();
        if (const auto& g = prog.kernels[kk].gather)
          check_gather_ids(*g, ptr[static_cast<size_t>(g->ids)], lay.gather_dims[kk]);
        if (!m.profile) {
          m.fns[kk](ptr.data(), arena->syms.data(), rt, &call);
          continue;
        }
        const auto t0 = std::chrono::steady_clock::now();
        m.fns[kk](ptr.data(), arena->syms.data(), rt, &call);
        team.barrier();
        m.kernel_seconds[kk] += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      }
      continue;
    }
    ctl.check_lazy([&] { return "before plan step " + std::to_string(s + 1) + " (interpreted)"; });
    team.barrier();  // the interpreter runs here, on what the kernels before it wrote
    if (!dims) throw InternalError("[cpu] an interpreted kernel needs the dim bindings");
    // The interpreter on views of the step's buffers.
    const auto& st = p.steps[s];
    const auto& body = *st.spec->body;
    std::map<std::string, HostTensor> views;
    std::map<std::string, const HostTensor*> args;
    for (const auto& n : body.nodes) {
      if (n.op != detail::PrimOp::Input) continue;
      const size_t slot = static_cast<size_t>(std::strtoul(n.name.c_str() + 1, nullptr, 10));
      std::vector<int64_t> shape;
      for (const Dim& d : n.shape) shape.push_back(d.evaluate(*dims));
      auto& t = views
                    .insert_or_assign(n.name, HostTensor::view(n.dtype, shape,
                                                               static_cast<const void*>(ptr[st.args[slot]])))
                    .first->second;
      args[n.name] = &t;
    }
    auto res = detail::reference::run(body, *dims, args);
    const HostTensor& r = res.at("out");
    if (r.nbytes()) std::memcpy(ptr[st.result], r.data(), r.nbytes());
  }
  team.finish();
  // Outputs not written in place: leaves and repeated values are copied.
  for (size_t o = 0; o < p.outputs.size(); ++o) {
    const uint32_t v = p.outputs[o].second;
    if (direct_output[v] == static_cast<int>(o)) continue;
    const std::string& name = p.outputs[o].first;
    std::vector<int64_t> shape;
    DType dt = prog.buffers[v].dtype;
    const void* data = ptr[v];
    if (!p.leaf_name[v].empty()) {
      const detail::Node* n = m.binding.leaf_node(p.leaf_name[v]);
      if (!n) throw InternalError("[cpu] output leaf '" + p.leaf_name[v] + "' is not an input");
      dt = n->dtype;
      for (const Dim& d : n->shape) shape.push_back(dim_value(d));
    } else {
      shape = out_shape(v);
    }
    int64_t count = 1;
    for (int64_t d : shape) count *= d;
    HostTensor t =
        HostTensor::from_bytes(dt, shape,
                               std::span<const std::byte>(static_cast<const std::byte*>(data),
                                                          static_cast<size_t>(count) * dtype_size(dt)));
    outputs.insert_or_assign(name, std::move(t));
  }
}

}  // namespace luminal::cpu
