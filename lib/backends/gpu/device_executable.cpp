#include "backends/gpu/device_executable.hpp"

#include <algorithm>
#include <cstring>
#include <map>
#include <mutex>

#include "backends/cpu/cpu_program.hpp"
#include "backends/gpu/device_collectives.hpp"
#include "backends/gpu/gpu_program.hpp"
#include "dist/collectives.hpp"
#include "kernel/memory_plan.hpp"
#include "luminal/error.hpp"

namespace luminal::gpu {

namespace {
constexpr size_t kAlign = 256;  // device allocations and arena offsets
}  // namespace

struct DeviceExecutable::Impl {
  const DeviceApi* api = nullptr;
  std::string tag;  // "[cuda] "
  int device = 0;
  std::shared_ptr<const compiler::KernelPlan> plan;
  std::shared_ptr<const detail::GraphImpl> graph;
  cpu::LoweredPlan lowered;
  GpuSource src;
  std::string codegen;
  std::vector<KernelResources> resources;
  void* module = nullptr;
  void* stream = nullptr;
  std::vector<void*> fns;       // per kernel (null: a library GEMM)
  uint64_t blas_workspace = 0;  // the BLAS calls' workspace (one stream: one workspace)
  std::shared_ptr<Communicator> comm;
  // A device-memory communicator's local steps (NCCL): device kernels; null: the host's.
  std::unique_ptr<DeviceLocalOps> device_ops;
  cpu::ParamBlocks param_blocks;  // held as blocks
  bool collectives = false;  // the plan has collective steps (run on the host)
  // The order the program runs in: kernels and collective steps, each a slot (the memory
  // planner's clock).
  std::vector<int> kernel_slot;  // per kernel
  int slots = 0;

  // A param kept in device memory across calls, uploaded again only when the Callable's
  // handle for it changes (a bind). A param whose size follows the dims has none (addr 0)
  // and is staged on every call like an input.
  struct Resident {
    uint64_t addr = 0;
    size_t bytes = 0;
    std::weak_ptr<const HostTensor> uploaded;  // the bound value on the device now
    bool current = false;                      // `uploaded` is on the device (false: upload on the next call)
    bool owns = true;                          // the allocation is this buffer's (not a pack member's range)
  };
  mutable std::vector<Resident> resident;  // per buffer
  // A call on a caller's stream joins the executable's stream and back (Callable::run_device).
  void* join_in = nullptr;
  void* join_out = nullptr;

  // A device-to-device copy queued after the kernels: an output the program passes through
  // from an input or param, or a second name for the same value (run_device).
  struct Copy {
    uint64_t dst, src;
    size_t bytes;
  };

  // Everything one binding of the dims needs; a captured graph refers to these
  // addresses, so a binding's memory never moves.
  struct Binding {
    std::vector<int64_t> syms;   // the dims' values, in program symbol order
    std::vector<size_t> bytes;   // per buffer
    std::vector<size_t> offset;  // per buffer, in the arena
    uint64_t arena = 0;
    size_t arena_bytes = 0;
    std::vector<uint64_t> addr;     // per buffer: in the arena, or its resident param's
    char* pinned = nullptr;         // staging: staged leaves, then outputs
    std::vector<size_t> pinned_at;  // per buffer (staged leaves and outputs)
    size_t pinned_bytes = 0;
    void* graph = nullptr;       // the host call's program, when the API captures
    bool host_captured = false;  // capture was tried
    // Programs captured for run_device, keyed by the addresses they were captured with
    // (a server's calls reuse a few buffers); most recently used last.
    std::vector<std::pair<std::vector<uint64_t>, void*>> device_graphs;
  };
  static constexpr size_t kDeviceGraphs = 4;
  mutable std::mutex mu;
  mutable std::map<std::vector<int64_t>, std::unique_ptr<Binding>> bindings;

  bool is_leaf(size_t b) const { return b < plan->leaf_name.size() && !plan->leaf_name[b].empty(); }
  bool is_resident(size_t b) const { return resident[b].addr != 0; }
  bool is_output(size_t b) const {
    for (const auto& [name, v] : plan->outputs)
      if (v == b) return true;
    return false;
  }

  Binding& binding(const std::vector<int64_t>& key, const std::map<std::string, int64_t>& syms) const {
    auto it = bindings.find(key);
    if (it != bindings.end()) return *it->second;
    auto b = std::make_unique<Binding>();
    b->syms = key;
    const kernel::Program& prog = lowered.prog;
    const size_t nb = prog.buffers.size();
    b->bytes.resize(nb);
    std::vector<kernel::BufferLifetime> life(nb);
    const int end = slots;
    for (size_t i = 0; i < nb; ++i) {
      b->bytes[i] = static_cast<size_t>(prog.buffers[i].elements.evaluate({}, syms)) * dtype_size(prog.buffers[i].dtype);
      life[i].bytes = is_resident(i) ? 1 : std::max<size_t>(b->bytes[i], 1);
      life[i].first_def = end;
      life[i].last_use = 0;
    }
    // Lifetimes in program order from the launch parameter lists and the collectives'
    // operands; leaves and outputs live through the whole program (copied in before, out
    // after).
    auto use = [&](size_t buf, int slot) {
      auto& l = life[buf];
      l.first_def = std::min(l.first_def, slot);
      l.last_use = std::max(l.last_use, slot);
    };
    for (size_t k = 0; k < prog.kernels.size(); ++k)
      for (int buf : src.launches[k].buffers) use(static_cast<size_t>(buf), kernel_slot[k]);
    for (size_t st = 0, slot = 0; st < lowered.steps.size(); ++st) {
      const auto& es = lowered.steps[st];
      if (es.collective) {
        use(plan->steps[st].args.at(0), static_cast<int>(slot));
        use(plan->steps[st].result, static_cast<int>(slot));
      }
      slot += es.collective ? 1 : static_cast<size_t>(es.k1 - es.k0);
    }
    for (size_t i = 0; i < nb; ++i) {
      // (State -- a counted split attention's counts -- keeps its memory to itself.)
      if (is_leaf(i) || is_output(i) || prog.buffers[i].role == kernel::BufferRole::State) {
        life[i].first_def = 0;
        life[i].last_use = end;
      }
      if (life[i].first_def > life[i].last_use) life[i].first_def = life[i].last_use;
    }
    const kernel::MemoryPlan mp = kernel::plan_memory(life, kAlign);
    b->offset = mp.offsets;
    b->arena_bytes = std::max<size_t>(mp.arena_bytes, kAlign);
    b->arena = api->alloc(b->arena_bytes);
    b->addr.resize(nb);
    for (size_t i = 0; i < nb; ++i) b->addr[i] = is_resident(i) ? resident[i].addr : b->arena + b->offset[i];
    // State buffers start at zero; the kernels leave them so after every call.
    try {
      for (size_t i = 0; i < nb; ++i)
        if (prog.buffers[i].role == kernel::BufferRole::State && b->bytes[i] > 0) {
          const std::vector<std::byte> zero(b->bytes[i]);
          api->copy_in(b->addr[i], zero.data(), zero.size(), stream);
          api->synchronize(stream, "zeroing a state buffer");
        }
    } catch (...) {
      api->free(b->arena);
      throw;
    }
    b->pinned_at.assign(nb, 0);
    for (size_t i = 0; i < nb; ++i)
      if ((is_leaf(i) && !is_resident(i)) || is_output(i)) {
        b->pinned_at[i] = b->pinned_bytes;
        b->pinned_bytes += (b->bytes[i] + kAlign - 1) / kAlign * kAlign;
      }
    if (b->pinned_bytes > 0) b->pinned = static_cast<char*>(api->alloc_pinned(b->pinned_bytes));
    // The binding is kept (and freed by the destructor) before anything else can throw.
    return *bindings.emplace(key, std::move(b)).first->second;
  }

  // The host call's program, captured by the first host call of the binding.
  void capture_host_program(Binding& b) const {
    if (b.host_captured) return;
    b.host_captured = true;
    if (collectives || !api->begin_capture(stream)) return;
    try {
      enqueue(b, b.addr, true, {}, {});
    } catch (...) {
      api->abort_capture(stream);
      throw;
    }
    b.graph = api->end_capture(stream);
  }

  // A collective step. A device-memory communicator (NCCL) works on the arena, its local
  // steps device kernels on the stream. Otherwise on the host: the kernels before it
  // drained, its operand copied out, the communicator's collective, the result copied back.
  void run_collective(const Binding& b, const std::vector<uint64_t>& addr, size_t step,
                      const DimBindings& dims) const {
    const auto& st = plan->steps[step];
    const size_t in = st.args.at(0), out = st.result;
    std::vector<int64_t> shape;
    for (const Dim& d : lowered.value_shape[in]) shape.push_back(d.evaluate(dims));
    if (device_ops) {
      dist::run_collective(*comm, *st.spec, shape, reinterpret_cast<const void*>(addr[in]),
                           reinterpret_cast<void*>(addr[out]), *device_ops);
      return;
    }
    std::vector<std::byte> host_in(b.bytes[in]), host_out(b.bytes[out]);
    if (!host_in.empty()) api->copy_out(host_in.data(), addr[in], host_in.size(), stream);
    api->synchronize(stream, "the kernels before a collective");
    dist::run_collective(*comm, *st.spec, shape, host_in.data(), host_out.data());
    if (!host_out.empty()) api->copy_in(addr[out], host_out.data(), host_out.size(), stream);
    api->synchronize(stream, "a collective's result");  // host_out is freed next
  }

  // The program on the stream, its buffers at `addr`: with `staged`, the staged leaves
  // copied in from the pinned staging first and the outputs copied out to it last; then
  // `copies`. `dims` are needed only by collectives (a program with them is never
  // captured).
  void enqueue(const Binding& b, const std::vector<uint64_t>& addr, bool staged,
               const std::vector<Copy>& copies, const DimBindings& dims) const {
    const kernel::Program& prog = lowered.prog;
    std::map<std::string, int64_t> syms;
    for (size_t i = 0; i < prog.symbols.size(); ++i) syms[prog.symbols[i]] = b.syms[i];
    if (staged)
      for (size_t i = 0; i < prog.buffers.size(); ++i)
        if (is_leaf(i) && !is_resident(i) && b.bytes[i] > 0)
          api->copy_in(addr[i], b.pinned + b.pinned_at[i], b.bytes[i], stream);
    std::vector<uint64_t> ptrs;
    std::vector<int64_t> symv;
    std::vector<void*> args;
    for (size_t step = 0; step < lowered.steps.size(); ++step) {
      const auto& es = lowered.steps[step];
      if (es.collective) {
        run_collective(b, addr, step, dims);
        continue;
      }
      for (int k = es.k0; k < es.k1; ++k)
        launch_kernel(b, addr, static_cast<size_t>(k), syms, ptrs, symv, args);
    }
    if (staged)
      for (size_t i = 0; i < prog.buffers.size(); ++i)
        if (!is_leaf(i) && is_output(i) && b.bytes[i] > 0)
          api->copy_out(b.pinned + b.pinned_at[i], addr[i], b.bytes[i], stream);
    for (const Copy& c : copies) api->copy_device(c.dst, c.src, c.bytes, stream);
  }

  // run_device's program: replayed from a graph captured with the same addresses, else
  // captured now (when the API captures and the program has no collectives), else queued.
  void enqueue_device(Binding& b, const std::vector<uint64_t>& addr, const std::vector<Copy>& copies,
                      const DimBindings& dims) const {
    std::vector<uint64_t> key = addr;
    for (const Copy& c : copies) key.insert(key.end(), {c.dst, c.src, c.bytes});
    auto& cache = b.device_graphs;
    for (size_t i = 0; i < cache.size(); ++i)
      if (cache[i].first == key) {
        std::rotate(cache.begin() + static_cast<std::ptrdiff_t>(i),
                    cache.begin() + static_cast<std::ptrdiff_t>(i) + 1, cache.end());
        api->launch_graph(cache.back().second, stream);
        return;
      }
    if (collectives || !api->begin_capture(stream)) {
      enqueue(b, addr, false, copies, dims);
      return;
    }
    void* graph = nullptr;
    try {
      enqueue(b, addr, false, copies, dims);
    } catch (...) {
      api->abort_capture(stream);
      throw;
    }
    graph = api->end_capture(stream);
    if (!graph) {  // the API could not capture it after all (HIP): queue it
      enqueue(b, addr, false, copies, dims);
      return;
    }
    if (cache.size() == kDeviceGraphs) {
      api->destroy_graph(cache.front().second);
      cache.erase(cache.begin());
    }
    cache.emplace_back(std::move(key), graph);
    api->launch_graph(graph, stream);
  }

  // The ids of kernel k's gather, when they come from the caller, in range (as on the CPU).
  void check_gather_ids(const kernel::Kernel& k, const int32_t* ids,
                        const std::map<std::string, int64_t>& syms) const {
    const int64_t count = k.gather->count.evaluate({}, syms), rows = k.gather->rows.evaluate({}, syms);
    for (int64_t i = 0; i < count; ++i)
      if (ids[i] < 0 || ids[i] >= rows)
        throw RuntimeError(kernel::gather_id_error(k.gather->op_name, ids[i], i, rows));
  }

  // The resident params on the device: uploaded (on the stream) when the call's handle is
  // not the one uploaded last. Without handles (`params` null), every call uploads.
  void upload_params(const std::map<std::string, const HostTensor*>& tensors, const detail::ParamMap* params,
                     const std::map<std::string, int64_t>& syms) const {
    for (size_t i = 0; i < resident.size(); ++i) {
      Resident& r = resident[i];
      if (!r.addr || !is_leaf(i)) continue;  // (a pack's buffer: its members are uploaded)
      const std::string& name = plan->leaf_name[i];
      std::shared_ptr<const HostTensor> handle;
      if (params) {
        auto it = params->find(name);
        if (it != params->end()) handle = it->second;
      }
      if (handle && r.current && r.uploaded.lock() == handle) continue;
      auto t = tensors.find(name);
      if (t == tensors.end() || !t->second) throw RuntimeError(tag + "no data for '" + name + "'");
      for (const auto& k : lowered.prog.kernels)
        if (k.gather && static_cast<size_t>(k.gather->ids) == i)
          check_gather_ids(k, reinterpret_cast<const int32_t*>(t->second->data()), syms);
      r.current = false;  // until the copy is queued
      api->copy_in(r.addr, t->second->data(), std::min(r.bytes, t->second->nbytes()), stream);
      r.uploaded = handle;
      r.current = handle != nullptr;
    }
  }

  // Kernel k on the stream (a grid with no blocks -- an empty dim -- launches nothing).
  // `ptrs`, `symv`, `args`: scratch reused across launches.
  void launch_kernel(const Binding& b, const std::vector<uint64_t>& addr, size_t k,
                     const std::map<std::string, int64_t>& syms, std::vector<uint64_t>& ptrs,
                     std::vector<int64_t>& symv, std::vector<void*>& args) const {
    const LaunchShape& l = src.launches[k];
    if (l.blas) {
      const size_t ab = dtype_size(l.blas->ab), d = dtype_size(l.blas->d_type);
      for (const BlasCall& c : blas_calls(*l.blas, syms))
        api->blas_gemm(device, c, addr[static_cast<size_t>(l.blas->a)] + static_cast<uint64_t>(c.off_a) * ab,
                       addr[static_cast<size_t>(l.blas->b)] + static_cast<uint64_t>(c.off_b) * ab,
                       addr[static_cast<size_t>(l.blas->d)] + static_cast<uint64_t>(c.off_d) * d,
                       blas_workspace, stream);
      return;
    }
    int64_t g[3];
    for (int a = 0; a < 3; ++a) g[a] = l.grid[a].evaluate({}, syms);
    if (g[0] <= 0 || g[1] <= 0 || g[2] <= 0) return;
    ptrs.clear();
    for (int buf : l.buffers) ptrs.push_back(addr[static_cast<size_t>(buf)]);
    symv.assign(b.syms.begin(), b.syms.end());
    args.clear();
    for (auto& p : ptrs) args.push_back(&p);
    for (auto& s : symv) args.push_back(&s);
    const unsigned grid[3] = {static_cast<unsigned>(g[0]), static_cast<unsigned>(g[1]),
                              static_cast<unsigned>(g[2])};
    const unsigned block[3] = {static_cast<unsigned>(l.block[0]), static_cast<unsigned>(l.block[1]),
                               static_cast<unsigned>(l.block[2])};
    api->launch(fns[k], grid, block, args.data(), stream, lowered.prog.kernels[k].name.c_str());
  }
};

DeviceExecutable::DeviceExecutable(const DeviceApi& api, std::shared_ptr<const compiler::KernelPlan> plan,
                                   std::shared_ptr<const detail::GraphImpl> graph, const Target& target,
                                   const DeviceBuildFn& build, std::shared_ptr<Communicator> comm,
                                   const std::map<std::string, ParamRegion>& param_blocks)
    : impl_(std::make_unique<Impl>()) {
  Impl& m = *impl_;
  m.api = &api;
  m.tag = std::string("[") + api.name() + "] ";
  m.device = target.device();
  m.plan = std::move(plan);
  m.graph = std::move(graph);
  // Library GEMMs call the API's BLAS; without one they are generated like the rest.
  std::string no_blas;
  const std::string blas = api.blas(&no_blas);
  kernel::lower::Options lower = gpu_lower_options();  // half GEMM operands kept
  if (blas.empty()) lower.gemm = kernel::lower::GemmChoice::Generated;
  m.lowered = cpu::lower_plan(*m.plan, lower, param_blocks);
  m.param_blocks = cpu::stored_blocks(m.lowered.prog);
  if (m.lowered.interpreted > 0)
    throw CompileError(m.tag + std::to_string(m.lowered.interpreted) +
                       " kernel(s) cannot be generated for the GPU and the device runtime has no interpreter "
                       "fallback: " + m.lowered.interpreted_why);
  m.kernel_slot.assign(m.lowered.prog.kernels.size(), 0);
  for (const auto& es : m.lowered.steps) {
    if (es.collective) {
      m.collectives = true;
      ++m.slots;
      continue;
    }
    for (int k = es.k0; k < es.k1; ++k) m.kernel_slot[static_cast<size_t>(k)] = m.slots++;
  }
  if (m.collectives && !comm)
    throw CompileError(m.tag +
                       "the program has collectives: it runs with the communicator it was compiled for");
  m.comm = std::move(comm);
  const std::string device_arch = api.arch(m.device);
  if (!target.arch().empty() && target.arch() != device_arch)
    throw CompileError(m.tag + "target " + target.to_string() + " asks for " + target.arch() + " but device " +
                       std::to_string(m.device) + " is " + device_arch);
  DeviceBuild built = build(m.lowered.prog, *m.plan, device_arch);
  m.src = std::move(built.src);
  m.codegen = std::move(built.codegen);
  m.resources = std::move(built.resources);
  const bool library =
      std::any_of(m.plan->steps.begin(), m.plan->steps.end(), [](const compiler::KernelPlan::Step& st) {
        return st.spec && st.spec->kind == ir::KernelKind::LibraryGemm;
      });
  const bool calls = library_calls(m.src);
  if (calls)
    m.codegen += " + " + blas;
  else if (library && blas.empty())
    m.codegen += " (library GEMMs generated: " + no_blas + ")";
  api.make_current(m.device);
  m.module = api.load_module(built.image);
  for (const auto& l : m.src.launches) m.fns.push_back(l.blas ? nullptr : api.function(m.module, l.name));
  if (calls && api.blas_workspace() > 0) m.blas_workspace = api.alloc(api.blas_workspace());
  m.stream = api.create_stream();
  m.join_in = api.create_event();
  m.join_out = api.create_event();
  // Params live on the device from the first call on (one allocation each, so their
  // addresses -- which captured graphs hold -- never move). Params stored packed
  // (kernel::Program::packs) share their pack's allocation, one after another.
  const kernel::Program& prog = m.lowered.prog;
  m.resident.resize(prog.buffers.size());
  for (const kernel::ParamPack& pk : prog.packs) {
    Impl::Resident& r = m.resident[static_cast<size_t>(pk.buffer)];
    r.bytes = static_cast<size_t>(*prog.buffers[static_cast<size_t>(pk.buffer)].elements.as_constant()) *
              dtype_size(prog.buffers[static_cast<size_t>(pk.buffer)].dtype);
    r.addr = api.alloc(r.bytes);
    uint64_t at = r.addr;
    for (int mb : pk.members) {
      const kernel::Buffer& buf = prog.buffers[static_cast<size_t>(mb)];
      Impl::Resident& x = m.resident[static_cast<size_t>(mb)];
      x.bytes = static_cast<size_t>(*buf.elements.as_constant()) * dtype_size(buf.dtype);
      x.addr = at;
      x.owns = false;
      at += x.bytes;
    }
  }
  for (size_t i = 0; i < m.resident.size(); ++i) {
    if (m.resident[i].addr) continue;  // (packed)
    const kernel::Buffer& buf = m.lowered.prog.buffers[i];
    const auto elements = buf.elements.as_constant();
    if (buf.role != kernel::BufferRole::Param || !m.is_leaf(i) || !elements || *elements <= 0) continue;
    m.resident[i].bytes = static_cast<size_t>(*elements) * dtype_size(buf.dtype);
    m.resident[i].addr = api.alloc(m.resident[i].bytes);
  }
  if (m.collectives && m.comm->device_buffers())
    m.device_ops = std::make_unique<DeviceLocalOps>(api, m.module, m.stream);
}

DeviceExecutable::~DeviceExecutable() {
  Impl& m = *impl_;
  if (!m.api) return;
  try {
    m.api->make_current(m.device);
  } catch (...) {  // a failing driver at teardown: release what we can
  }
  m.device_ops.reset();  // its scratch, while the device is current
  for (auto& [key, b] : m.bindings) {
    if (b->graph) m.api->destroy_graph(b->graph);
    for (auto& [addr, g] : b->device_graphs) m.api->destroy_graph(g);
    if (b->arena) m.api->free(b->arena);
    if (b->pinned) m.api->free_pinned(b->pinned);
  }
  for (const auto& r : m.resident)
    if (r.addr && r.owns) m.api->free(r.addr);
  if (m.blas_workspace) m.api->free(m.blas_workspace);
  if (m.join_in) m.api->destroy_event(m.join_in);
  if (m.join_out) m.api->destroy_event(m.join_out);
  if (m.stream) m.api->destroy_stream(m.stream);
  if (m.module) m.api->unload_module(m.module);
}

const std::string& DeviceExecutable::codegen() const { return impl_->codegen; }
const std::vector<KernelResources>& DeviceExecutable::resources() const { return impl_->resources; }
int64_t DeviceExecutable::kernels() const { return static_cast<int64_t>(impl_->lowered.prog.kernels.size()); }
detail::FoldedLaunches DeviceExecutable::folded() const { return folded_launches(impl_->src); }
const std::map<std::string, ParamRegion>& DeviceExecutable::param_blocks() const {
  return impl_->param_blocks;
}

namespace {
// The program's symbols' values, in its order (the key of a binding), and by name.
std::vector<int64_t> symbol_values(const kernel::Program& prog, const DimBindings& dims,
                                   const std::string& tag, std::map<std::string, int64_t>& syms) {
  std::vector<int64_t> key;
  for (const auto& s : prog.symbols) {
    auto it = dims.find(s);
    if (it == dims.end()) throw RuntimeError(tag + "dim '" + s + "' is not bound");
    key.push_back(it->second);
    syms[s] = it->second;
  }
  return key;
}
}  // namespace

std::map<std::string, HostTensor> DeviceExecutable::run(const DimBindings& dims,
                                                        const std::map<std::string, const HostTensor*>& tensors) const {
  return run_host(dims, tensors, nullptr);
}

std::map<std::string, HostTensor> DeviceExecutable::run_with_params(
    const DimBindings& dims, const std::map<std::string, const HostTensor*>& tensors,
    const detail::ParamMap& params) const {
  return run_host(dims, tensors, &params);
}

std::map<std::string, HostTensor> DeviceExecutable::run_host(
    const DimBindings& dims, const std::map<std::string, const HostTensor*>& tensors,
    const detail::ParamMap* params) const {
  const Impl& m = *impl_;
  const DeviceApi& api = *m.api;
  const kernel::Program& prog = m.lowered.prog;
  const compiler::KernelPlan& p = *m.plan;
  std::map<std::string, int64_t> syms;
  const std::vector<int64_t> key = symbol_values(prog, dims, m.tag, syms);
  std::lock_guard<std::mutex> lock(m.mu);
  api.make_current(m.device);
  m.upload_params(tensors, params, syms);
  Impl::Binding& b = m.binding(key, syms);
  // Inputs (and params staged per call) into the pinned staging; ids of gathers checked
  // like on the CPU.
  for (size_t v = 0; v < p.leaf_name.size(); ++v) {
    if (p.leaf_name[v].empty() || m.is_resident(v)) continue;
    auto it = tensors.find(p.leaf_name[v]);
    if (it == tensors.end() || !it->second) throw RuntimeError(m.tag + "no data for '" + p.leaf_name[v] + "'");
    const size_t n = std::min(b.bytes[v], it->second->nbytes());
    if (n) std::memcpy(b.pinned + b.pinned_at[v], it->second->data(), n);
  }
  for (const auto& k : prog.kernels)
    if (k.gather && m.is_leaf(static_cast<size_t>(k.gather->ids)) &&
        !m.is_resident(static_cast<size_t>(k.gather->ids)))
      m.check_gather_ids(
          k, reinterpret_cast<const int32_t*>(b.pinned + b.pinned_at[static_cast<size_t>(k.gather->ids)]),
          syms);
  m.capture_host_program(b);
  if (b.graph)
    api.launch_graph(b.graph, m.stream);
  else
    m.enqueue(b, b.addr, true, {}, dims);
  api.synchronize(m.stream, "the program");
  std::map<std::string, HostTensor> out;
  for (const auto& [name, v] : p.outputs) {
    std::vector<int64_t> shape;
    DType dt = prog.buffers[v].dtype;
    if (!p.leaf_name[v].empty()) {  // an input passed through
      const HostTensor* t = tensors.at(p.leaf_name[v]);
      out.insert_or_assign(name, HostTensor::from_bytes(t->dtype(), t->shape(),
                                                        std::span<const std::byte>(t->data(), t->nbytes())));
      continue;
    }
    for (const Dim& dm : m.lowered.value_shape[v]) shape.push_back(dm.evaluate(dims));
    out.insert_or_assign(
        name, HostTensor::from_bytes(dt, shape,
                                     std::span<const std::byte>(reinterpret_cast<const std::byte*>(b.pinned + b.pinned_at[v]),
                                                                b.bytes[v])));
  }
  return out;
}

void DeviceExecutable::run_device(const DimBindings& dims, const std::map<std::string, DeviceTensor>& inputs,
                                  const detail::ParamMap& params,
                                  const std::map<std::string, DeviceTensor>& outputs, void* stream) const {
  const Impl& m = *impl_;
  const DeviceApi& api = *m.api;
  const kernel::Program& prog = m.lowered.prog;
  const compiler::KernelPlan& p = *m.plan;
  std::map<std::string, int64_t> syms;
  const std::vector<int64_t> key = symbol_values(prog, dims, m.tag, syms);
  std::map<std::string, const HostTensor*> param_tensors;
  for (const auto& [name, t] : params) param_tensors[name] = t.get();
  std::lock_guard<std::mutex> lock(m.mu);
  api.make_current(m.device);
  // The executable's stream starts after what the caller queued before...
  api.record_event(m.join_in, stream);
  api.wait_event(m.stream, m.join_in);
  m.upload_params(param_tensors, &params, syms);
  Impl::Binding& b = m.binding(key, syms);
  // Inputs and outputs at the caller's addresses; a param staged per call into the arena.
  std::vector<uint64_t> addr = b.addr;
  for (size_t v = 0; v < p.leaf_name.size(); ++v) {
    if (p.leaf_name[v].empty() || m.is_resident(v)) continue;
    if (auto in = inputs.find(p.leaf_name[v]); in != inputs.end()) {
      addr[v] = in->second.address;
    } else if (b.bytes[v] > 0) {  // from pageable memory: the driver stages it before returning
      const HostTensor* t = param_tensors.at(p.leaf_name[v]);
      api.copy_in(addr[v], t->data(), std::min(b.bytes[v], t->nbytes()), m.stream);
    }
  }
  std::vector<Impl::Copy> copies;
  std::vector<bool> placed(addr.size(), false);
  for (const auto& [name, v] : p.outputs) {
    const uint64_t dst = outputs.at(name).address;
    if (m.is_leaf(v) || placed[v]) {  // passed through, or a second name for one value
      if (b.bytes[v] > 0) copies.push_back({dst, addr[v], b.bytes[v]});
      continue;
    }
    addr[v] = dst;
    placed[v] = true;
  }
  // Ids the program gathers by, from an input: checked on the host (the call waits).
  for (const auto& k : prog.kernels) {
    const auto ids = static_cast<size_t>(k.gather ? k.gather->ids : 0);
    if (!k.gather || !m.is_leaf(ids) || m.is_resident(ids) || !inputs.count(p.leaf_name[ids]) ||
        b.bytes[ids] == 0)
      continue;
    api.copy_out(b.pinned + b.pinned_at[ids], addr[ids], b.bytes[ids], m.stream);
    api.synchronize(m.stream, "the gather ids' copy");
    m.check_gather_ids(k, reinterpret_cast<const int32_t*>(b.pinned + b.pinned_at[ids]), syms);
  }
  m.enqueue_device(b, addr, copies, dims);
  // ...and what the caller queues next starts after the program.
  api.record_event(m.join_out, m.stream);
  api.wait_event(stream, m.join_out);
}

}  // namespace luminal::gpu
