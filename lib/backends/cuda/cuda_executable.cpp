#include "backends/cuda/cuda_executable.hpp"

#include <cstring>
#include <map>
#include <mutex>

#include "backends/cpu/cpu_program.hpp"
#include "backends/cuda/cuda_driver.hpp"
#include "backends/cuda/cuda_module.hpp"
#include "backends/cuda/nvrtc.hpp"
#include "backends/gpu/gpu_arch.hpp"
#include "backends/gpu/gpu_program.hpp"
#include "backends/gpu/gpu_renderer.hpp"
#include "kernel/memory_plan.hpp"
#include "luminal/error.hpp"

namespace luminal::cuda {

namespace {
constexpr size_t kAlign = 256;  // device allocations and arena offsets
constexpr int kAttrMajor = 75, kAttrMinor = 76;  // CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_*
constexpr int kCaptureThreadLocal = 1;           // CU_STREAM_CAPTURE_MODE_THREAD_LOCAL
}  // namespace

struct CudaExecutable::Impl {
  const Driver* d = nullptr;
  std::shared_ptr<const compiler::KernelPlan> plan;
  std::shared_ptr<const detail::GraphImpl> graph;
  cpu::LoweredPlan lowered;
  gpu::GpuSource src;
  std::string codegen;
  std::vector<KernelResources> resources;
  void* ctx = nullptr;
  void* module = nullptr;
  void* stream = nullptr;
  std::vector<void*> fns;  // per kernel

  // Everything one binding of the dims needs; the captured graph refers to these
  // addresses, so a binding's memory never moves.
  struct Binding {
    std::vector<size_t> bytes;   // per buffer
    std::vector<size_t> offset;  // per buffer, in the arena
    CUdeviceptr arena = 0;
    size_t arena_bytes = 0;
    char* pinned = nullptr;            // staging: leaves, then outputs
    std::vector<size_t> pinned_at;     // per buffer (leaves and computed outputs)
    size_t pinned_bytes = 0;
    void* exec = nullptr;              // instantiated CUDA graph
  };
  mutable std::mutex mu;
  mutable std::map<std::vector<int64_t>, std::unique_ptr<Binding>> bindings;

  bool is_leaf(size_t b) const { return b < plan->leaf_name.size() && !plan->leaf_name[b].empty(); }
  bool is_output(size_t b) const {
    for (const auto& [name, v] : plan->outputs)
      if (v == b) return true;
    return false;
  }

  Binding& binding(const std::vector<int64_t>& key, const std::map<std::string, int64_t>& syms) const {
    auto it = bindings.find(key);
    if (it != bindings.end()) return *it->second;
    auto b = std::make_unique<Binding>();
    const kernel::Program& prog = lowered.prog;
    const size_t nb = prog.buffers.size();
    b->bytes.resize(nb);
    std::vector<kernel::BufferLifetime> life(nb);
    const int end = static_cast<int>(prog.kernels.size());
    for (size_t i = 0; i < nb; ++i) {
      b->bytes[i] = static_cast<size_t>(prog.buffers[i].elements.evaluate({}, syms)) * dtype_size(prog.buffers[i].dtype);
      life[i].bytes = std::max<size_t>(b->bytes[i], 1);
      life[i].first_def = end;
      life[i].last_use = 0;
    }
    // Lifetimes in kernel order from the launch parameter lists; leaves and outputs live
    // through the whole program (copied in before, out after).
    for (int k = 0; k < end; ++k)
      for (int buf : src.launches[static_cast<size_t>(k)].buffers) {
        auto& l = life[static_cast<size_t>(buf)];
        l.first_def = std::min(l.first_def, k);
        l.last_use = std::max(l.last_use, k);
      }
    for (size_t i = 0; i < nb; ++i) {
      if (is_leaf(i) || is_output(i)) {
        life[i].first_def = 0;
        life[i].last_use = end;
      }
      if (life[i].first_def > life[i].last_use) life[i].first_def = life[i].last_use;
    }
    const kernel::MemoryPlan mp = kernel::plan_memory(life, kAlign);
    b->offset = mp.offsets;
    b->arena_bytes = std::max<size_t>(mp.arena_bytes, kAlign);
    d->check(d->cuMemAlloc(&b->arena, b->arena_bytes), "device arena allocation");
    b->pinned_at.assign(nb, 0);
    for (size_t i = 0; i < nb; ++i)
      if (is_leaf(i) || is_output(i)) {
        b->pinned_at[i] = b->pinned_bytes;
        b->pinned_bytes += (b->bytes[i] + kAlign - 1) / kAlign * kAlign;
      }
    if (b->pinned_bytes > 0)
      d->check(d->cuMemAllocHost(reinterpret_cast<void**>(&b->pinned), b->pinned_bytes), "pinned staging allocation");
    capture(*b, key);
    return *bindings.emplace(key, std::move(b)).first->second;
  }

  // The program as one CUDA Graph: inputs in, kernels, outputs out.
  void capture(Binding& b, const std::vector<int64_t>& sym_values) const {
    const kernel::Program& prog = lowered.prog;
    std::map<std::string, int64_t> syms;
    for (size_t i = 0; i < prog.symbols.size(); ++i) syms[prog.symbols[i]] = sym_values[i];
    d->check(d->cuStreamBeginCapture(stream, kCaptureThreadLocal), "cuStreamBeginCapture");
    try {
      for (size_t i = 0; i < prog.buffers.size(); ++i)
        if (is_leaf(i) && b.bytes[i] > 0)
          d->check(d->cuMemcpyHtoDAsync(b.arena + b.offset[i], b.pinned + b.pinned_at[i], b.bytes[i], stream),
                   "input copy");
      for (size_t k = 0; k < prog.kernels.size(); ++k) {
        const gpu::LaunchShape& l = src.launches[k];
        int64_t g[3];
        for (int a = 0; a < 3; ++a) g[a] = l.grid[a].evaluate({}, syms);
        if (g[0] <= 0 || g[1] <= 0 || g[2] <= 0) continue;
        std::vector<CUdeviceptr> ptrs;
        for (int buf : l.buffers) ptrs.push_back(b.arena + b.offset[static_cast<size_t>(buf)]);
        std::vector<int64_t> symv(sym_values.begin(), sym_values.end());
        std::vector<void*> args;
        for (auto& p : ptrs) args.push_back(&p);
        for (auto& s : symv) args.push_back(&s);
        d->check(d->cuLaunchKernel(fns[k], static_cast<unsigned>(g[0]), static_cast<unsigned>(g[1]),
                                   static_cast<unsigned>(g[2]), static_cast<unsigned>(l.block[0]),
                                   static_cast<unsigned>(l.block[1]), static_cast<unsigned>(l.block[2]), 0, stream,
                                   args.data(), nullptr),
                 prog.kernels[k].name.c_str());
      }
      for (size_t i = 0; i < prog.buffers.size(); ++i)
        if (!is_leaf(i) && is_output(i) && b.bytes[i] > 0)
          d->check(d->cuMemcpyDtoHAsync(b.pinned + b.pinned_at[i], b.arena + b.offset[i], b.bytes[i], stream),
                   "output copy");
    } catch (...) {
      void* g = nullptr;
      d->cuStreamEndCapture(stream, &g);
      if (g) d->cuGraphDestroy(g);
      throw;
    }
    void* g = nullptr;
    d->check(d->cuStreamEndCapture(stream, &g), "cuStreamEndCapture");
    const CUresult rc = d->cuGraphInstantiate(&b.exec, g, 0);
    d->cuGraphDestroy(g);
    d->check(rc, "cuGraphInstantiate");
  }
};

CudaExecutable::CudaExecutable(std::shared_ptr<const compiler::KernelPlan> plan,
                               std::shared_ptr<const detail::GraphImpl> graph, const Target& target,
                               const CompileOptions& options)
    : impl_(std::make_unique<Impl>()) {
  Impl& m = *impl_;
  std::string why;
  m.d = Driver::get(&why);
  if (!m.d) throw CompileError("[cuda] " + why);
  const Driver& d = *m.d;
  m.plan = std::move(plan);
  m.graph = std::move(graph);
  m.lowered = cpu::lower_plan(*m.plan, {});
  if (m.lowered.interpreted > 0)
    throw CompileError("[cuda] " + std::to_string(m.lowered.interpreted) +
                       " kernel(s) cannot be generated for the GPU and the CUDA runtime has no interpreter "
                       "fallback: " + m.lowered.interpreted_why);
  int dev = 0, major = 0, minor = 0;
  d.check(d.cuDeviceGet(&dev, target.device()), "cuDeviceGet");
  d.check(d.cuDeviceGetAttribute(&major, kAttrMajor, dev), "compute capability");
  d.check(d.cuDeviceGetAttribute(&minor, kAttrMinor, dev), "compute capability");
  const std::string device_arch = "sm_" + std::to_string(major * 10 + minor);
  if (!target.arch().empty() && target.arch() != device_arch)
    throw CompileError("[cuda] target " + target.to_string() + " asks for " + target.arch() + " but device " +
                       std::to_string(target.device()) + " is " + device_arch);
  // CUBIN for the device; a device newer than NVRTC gets PTX for the newest architecture
  // NVRTC knows, which the driver compiles.
  const Nvrtc* nv = Nvrtc::get(&why);
  if (!nv) throw CompileError("[cuda] " + why);
  std::string arch = device_arch;
  bool cubin = nv->supports(arch);
  if (!cubin) arch = "sm_90";
  const gpu::GpuArch ga = gpu::arch_for(Target::cuda(target.device()).with_arch(arch));
  m.src = gpu::render_gpu(m.lowered.prog, ga, gpu::plan_schedules(*m.plan));
  const CudaModule mod = compile_module(m.src.device_source(), arch, cubin, options.cache_dir);
  m.codegen = mod.codegen;
  for (const auto& l : m.src.launches)
    for (const auto& r : mod.resources)
      if (r.name == l.name) m.resources.push_back(r);
  d.check(d.cuDevicePrimaryCtxRetain(&m.ctx, dev), "cuDevicePrimaryCtxRetain");
  d.check(d.cuCtxSetCurrent(m.ctx), "cuCtxSetCurrent");
  d.check(d.cuModuleLoadData(&m.module, mod.image.data()), "cuModuleLoadData");
  for (const auto& l : m.src.launches) {
    void* f = nullptr;
    d.check(d.cuModuleGetFunction(&f, m.module, l.name.c_str()), l.name.c_str());
    m.fns.push_back(f);
  }
  d.check(d.cuStreamCreate(&m.stream, 1 /* CU_STREAM_NON_BLOCKING */), "cuStreamCreate");
}

CudaExecutable::~CudaExecutable() {
  Impl& m = *impl_;
  if (!m.d) return;
  m.d->cuCtxSetCurrent(m.ctx);
  for (auto& [key, b] : m.bindings) {
    if (b->exec) m.d->cuGraphExecDestroy(b->exec);
    if (b->arena) m.d->cuMemFree(b->arena);
    if (b->pinned) m.d->cuMemFreeHost(b->pinned);
  }
  if (m.module) m.d->cuModuleUnload(m.module);
}

const std::string& CudaExecutable::codegen() const { return impl_->codegen; }
const std::vector<KernelResources>& CudaExecutable::resources() const { return impl_->resources; }
int64_t CudaExecutable::kernels() const { return static_cast<int64_t>(impl_->lowered.prog.kernels.size()); }

std::map<std::string, HostTensor> CudaExecutable::run(const DimBindings& dims,
                                                      const std::map<std::string, const HostTensor*>& tensors) const {
  const Impl& m = *impl_;
  const Driver& d = *m.d;
  const kernel::Program& prog = m.lowered.prog;
  const compiler::KernelPlan& p = *m.plan;
  std::vector<int64_t> key;
  std::map<std::string, int64_t> syms;
  for (const auto& s : prog.symbols) {
    auto it = dims.find(s);
    if (it == dims.end()) throw RuntimeError("[cuda] dim '" + s + "' is not bound");
    key.push_back(it->second);
    syms[s] = it->second;
  }
  std::lock_guard<std::mutex> lock(m.mu);
  d.check(d.cuCtxSetCurrent(m.ctx), "cuCtxSetCurrent");
  Impl::Binding& b = m.binding(key, syms);
  // Inputs and params into the pinned staging; ids of gathers checked like on the CPU.
  for (size_t v = 0; v < p.leaf_name.size(); ++v) {
    if (p.leaf_name[v].empty()) continue;
    auto it = tensors.find(p.leaf_name[v]);
    if (it == tensors.end() || !it->second) throw RuntimeError("[cuda] no data for '" + p.leaf_name[v] + "'");
    const size_t n = std::min(b.bytes[v], it->second->nbytes());
    if (n) std::memcpy(b.pinned + b.pinned_at[v], it->second->data(), n);
  }
  for (const auto& k : prog.kernels)
    if (k.gather && m.is_leaf(static_cast<size_t>(k.gather->ids))) {
      const auto* ids = reinterpret_cast<const int32_t*>(b.pinned + b.pinned_at[static_cast<size_t>(k.gather->ids)]);
      const int64_t count = k.gather->count.evaluate({}, syms), rows = k.gather->rows.evaluate({}, syms);
      for (int64_t i = 0; i < count; ++i)
        if (ids[i] < 0 || ids[i] >= rows) throw RuntimeError(kernel::gather_id_error(k.gather->op_name, ids[i], i, rows));
    }
  d.check(d.cuGraphLaunch(b.exec, m.stream), "cuGraphLaunch");
  d.check(d.cuStreamSynchronize(m.stream), "the program");
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

}  // namespace luminal::cuda
