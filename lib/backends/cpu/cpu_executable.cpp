// Plan -> kernel::Program -> one C TU -> JIT -> calls in plan order (see the header).
#include "backends/cpu/cpu_executable.hpp"

#include <dlfcn.h>

#include <array>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <mutex>

#include "backends/cpu/c_renderer.hpp"
#include "backends/cpu/lower_body.hpp"
#include "backends/reference/interpreter.hpp"
#include "graph/dim_expr.hpp"
#include "graph/dim_vars.hpp"
#include "kernel/memory_plan.hpp"
#include "luminal/error.hpp"

namespace luminal::cpu {

namespace {

constexpr size_t kNone = std::numeric_limits<size_t>::max();
constexpr size_t kAlign = 64;

struct AlignedFree {
  void operator()(std::byte* p) const { std::free(p); }
};

// Scratch of one call: the arena plus the tables handed to the kernels.
struct Arena {
  std::unique_ptr<std::byte, AlignedFree> mem;
  size_t capacity = 0;
  std::vector<void*> ptrs;
  std::vector<int64_t> syms;
  std::vector<int64_t> key;
};

// Where each buffer lives for one binding of the symbols.
struct Layout {
  std::vector<size_t> offset;     // per buffer: arena offset, kNone if not in the arena
  std::vector<int64_t> elements;  // per buffer
  size_t arena_bytes = 0;
  size_t total_bytes = 0;
  std::vector<std::array<int64_t, 2>> gather_dims;  // per kernel: a Gather's {count, rows}
};

// A generated gather never reads outside its table; an id out of range is the caller's
// error, reported before the kernel runs with the interpreter's message.
void check_gather_ids(const kernel::Gather& g, const void* ids, const std::array<int64_t, 2>& dims) {
  const auto* id = static_cast<const int32_t*>(ids);
  for (int64_t i = 0; i < dims[0]; ++i)
    if (id[i] < 0 || id[i] >= dims[1]) throw RuntimeError(kernel::gather_id_error(g.op_name, id[i], i, dims[1]));
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

// Value of `d` with variables from (names, values), without allocating; false when a
// variable is unknown or a division by zero would occur.
bool eval_dim(const Dim& d, const std::vector<std::string>& names, const int64_t* values, int64_t& out) {
  const auto& e = *d.expr();
  int64_t acc = e.constant;
  for (const auto& t : e.terms) {
    int64_t prod = t.coeff;
    for (const auto& a : t.atoms) {
      int64_t v = 0;
      if (a->kind == detail::AtomKind::Var) {
        size_t i = 0;
        while (i < names.size() && names[i] != a->name) ++i;
        if (i == names.size()) return false;
        v = values[i];
      } else {
        int64_t x = 0, y = 0;
        if (!eval_dim(a->a, names, values, x) || !eval_dim(a->b, names, values, y)) return false;
        switch (a->kind) {
          case detail::AtomKind::Div:
            if (y == 0) return false;
            v = detail::floor_div(x, y);
            break;
          case detail::AtomKind::Mod:
            if (y == 0) return false;
            v = detail::floor_mod(x, y);
            break;
          case detail::AtomKind::Min:
            v = std::min(x, y);
            break;
          case detail::AtomKind::Max:
            v = std::max(x, y);
            break;
          default:
            break;
        }
      }
      prod *= v;
    }
    acc += prod;
  }
  out = acc;
  return true;
}

}  // namespace

struct CpuExecutable::Impl {
  // One executable unit per plan step: generated kernels [k0, k1), or the interpreter.
  struct Step {
    int k0 = 0, k1 = 0;
    bool interpreted = false;
  };
  std::shared_ptr<const compiler::KernelPlan> plan;
  kernel::Program prog;
  std::vector<int> value_buffer;   // plan value -> program buffer
  std::vector<int> direct_output;  // plan value -> index into plan->outputs written in place, or -1
  std::vector<std::vector<Dim>> value_shape;  // plan value -> its symbolic shape (computed values)
  std::vector<Step> steps;
  std::vector<KernelFn> fns;
  std::shared_ptr<const JitLibrary> lib;
  std::vector<kernel::BufferLifetime> lifetimes;  // per buffer (bytes filled per layout)
  std::vector<uint8_t> in_arena;                  // per buffer
  std::vector<size_t> dtype_bytes;                // per buffer

  // Call validation and dims, for the allocation-free path.
  struct Leaf {
    const detail::Node* node = nullptr;
    bool param = false;
    int value = -1;  // plan value, -1 when the plan does not read it
    std::vector<int> axis_var;  // per axis: index into var_names, -1 for a constant dim
  };
  std::shared_ptr<const detail::GraphImpl> graph;
  std::vector<Leaf> leaves;  // graph inputs then params
  size_t n_inputs = 0;
  std::vector<std::string> var_names;  // every dim variable the program needs
  std::vector<detail::VarRange> var_range;
  std::vector<int> sym_var;  // prog.symbols[i] -> var index
  bool fast_ok = false;

  // LUMINAL_CPU_PROFILE=1: per-kernel wall time summed over calls, printed at exit
  // (diagnostics only; not synchronized between concurrent calls).
  bool profile = false;
  mutable std::vector<double> kernel_seconds;

  mutable std::mutex mu;
  mutable std::vector<Arena*> free_arenas;
  mutable std::vector<std::unique_ptr<Arena>> all_arenas;
  // Layouts per binding of the dim variables, least recently used evicted beyond
  // kMaxLayouts: a server seeing every (batch, sequence) pair must not grow without
  // bound. Calls hold a shared_ptr, so an evicted layout outlives the calls using it.
  struct CachedLayout {
    std::shared_ptr<const Layout> layout;
    uint64_t last_use = 0;
  };
  static constexpr size_t kMaxLayouts = 256;
  mutable std::map<std::vector<int64_t>, CachedLayout> layouts;
  mutable uint64_t layout_clock = 0;

  std::shared_ptr<const Layout> layout(const std::vector<int64_t>& key) const {
    std::lock_guard<std::mutex> lock(mu);
    auto it = layouts.find(key);
    if (it != layouts.end()) {
      it->second.last_use = ++layout_clock;
      return it->second.layout;
    }
    if (layouts.size() >= kMaxLayouts) {
      auto oldest = layouts.begin();
      for (auto i = layouts.begin(); i != layouts.end(); ++i)
        if (i->second.last_use < oldest->second.last_use) oldest = i;
      layouts.erase(oldest);
    }
    std::map<std::string, int64_t> syms;
    for (size_t i = 0; i < prog.symbols.size(); ++i) syms[prog.symbols[i]] = key[i];
    auto l = std::make_shared<Layout>();
    l->offset.assign(prog.buffers.size(), kNone);
    l->elements.resize(prog.buffers.size());
    std::vector<kernel::BufferLifetime> lt;
    std::vector<size_t> ids;
    for (size_t b = 0; b < prog.buffers.size(); ++b) {
      l->elements[b] = prog.buffers[b].elements.evaluate({}, syms);
      if (!in_arena[b]) continue;
      kernel::BufferLifetime x = lifetimes[b];
      x.bytes = static_cast<size_t>(l->elements[b]) * dtype_bytes[b];
      lt.push_back(x);
      ids.push_back(b);
    }
    l->gather_dims.resize(prog.kernels.size());
    for (size_t k = 0; k < prog.kernels.size(); ++k)
      if (const auto& g = prog.kernels[k].gather)
        l->gather_dims[k] = {g->count.evaluate({}, syms), g->rows.evaluate({}, syms)};
    kernel::MemoryPlan mp = kernel::plan_memory(lt, kAlign);
    for (size_t i = 0; i < ids.size(); ++i) l->offset[ids[i]] = mp.offsets[i];
    l->arena_bytes = mp.arena_bytes;
    l->total_bytes = mp.total_bytes;
    layouts.emplace(key, CachedLayout{l, ++layout_clock});
    return l;
  }

  Arena* acquire(size_t bytes) const {
    Arena* a = nullptr;
    {
      std::lock_guard<std::mutex> lock(mu);
      if (!free_arenas.empty()) {
        a = free_arenas.back();
        free_arenas.pop_back();
      } else {
        all_arenas.push_back(std::make_unique<Arena>());
        a = all_arenas.back().get();
        free_arenas.reserve(all_arenas.size());  // release() never allocates
        a->ptrs.resize(prog.buffers.size());
        a->syms.resize(prog.symbols.size());
        a->key.resize(prog.symbols.size());
      }
    }
    if (a->capacity < bytes) {
      const size_t cap = (bytes + kAlign - 1) / kAlign * kAlign;
      void* p = std::aligned_alloc(kAlign, cap);
      if (!p) {
        release(a);
        throw RuntimeError("[cpu] cannot allocate an arena of " + std::to_string(cap) + " bytes");
      }
      a->mem.reset(static_cast<std::byte*>(p));
      a->capacity = cap;
    }
    return a;
  }
  void release(Arena* a) const {
    std::lock_guard<std::mutex> lock(mu);
    free_arenas.push_back(a);
  }
};

CpuExecutable::CpuExecutable(std::shared_ptr<const compiler::KernelPlan> plan,
                             std::shared_ptr<const detail::GraphImpl> graph, const CpuBuildOptions& opt)
    : impl_(std::make_unique<Impl>()), plan_(std::move(plan)) {
  Impl& m = *impl_;
  m.plan = plan_;
  m.graph = std::move(graph);
  const compiler::KernelPlan& p = *plan_;
  kernel::Program& prog = m.prog;
  const size_t nv = p.leaf_name.size();
  m.value_buffer.assign(nv, -1);
  m.direct_output.assign(nv, -1);
  for (size_t o = 0; o < p.outputs.size(); ++o) {
    const uint32_t v = p.outputs[o].second;
    if (p.leaf_name[v].empty() && m.direct_output[v] < 0) m.direct_output[v] = static_cast<int>(o);
  }
  // Shapes of values: a leaf's from a step that reads it, a result's from its body.
  std::vector<const detail::Node*> value_node(nv, nullptr);
  for (const auto& st : p.steps) {
    const auto& body = *st.spec->body;
    value_node[st.result] = &body.nodes[body.outputs.at(0).second];
    for (const auto& n : body.nodes)
      if (n.op == detail::PrimOp::Input && n.name.size() > 1 && n.name[0] == '%') {
        const size_t s = static_cast<size_t>(std::strtoul(n.name.c_str() + 1, nullptr, 10));
        if (s < st.args.size() && !value_node[st.args[s]]) value_node[st.args[s]] = &n;
      }
  }
  m.value_shape.resize(nv);
  for (size_t v = 0; v < nv; ++v) {
    if (value_node[v]) m.value_shape[v] = value_node[v]->shape;
    kernel::Buffer b;
    b.name = p.leaf_name[v].empty() ? "v" + std::to_string(v) : p.leaf_name[v];
    if (value_node[v]) {
      b.dtype = value_node[v]->dtype;
      b.elements = kernel::Index(1);
      for (const Dim& d : value_node[v]->shape) b.elements = b.elements * dim_index(d, prog);
    } else {
      b.elements = kernel::Index(0);  // a leaf only passed through to an output (copied from the caller)
    }
    b.role = !p.leaf_name[v].empty()
                 ? (p.leaf_is_param[v] ? kernel::BufferRole::Param : kernel::BufferRole::Input)
             : m.direct_output[v] >= 0 ? kernel::BufferRole::Output
                                       : kernel::BufferRole::Intermediate;
    prog.buffers.push_back(b);
    m.value_buffer[v] = static_cast<int>(v);
  }
  const auto t_lower = std::chrono::steady_clock::now();
  // Lower every step; remember which buffers each step created (its temporaries).
  LowerOptions lo;
  if (const char* g = std::getenv("LUMINAL_CPU_GEMM")) lo.gemm_impl = g;
  std::vector<int> temp_step;  // per buffer beyond the values: the step that owns it
  for (size_t s = 0; s < p.steps.size(); ++s) {
    const auto& st = p.steps[s];
    std::vector<int> args;
    for (uint32_t a : st.args) args.push_back(m.value_buffer[a]);
    Impl::Step es;
    es.k0 = static_cast<int>(prog.kernels.size());
    const size_t nb = prog.buffers.size();
    std::string why;
    if (!lower_spec(*st.spec, args, m.value_buffer[st.result], "k" + std::to_string(s), prog, &why, lo)) {
      es.interpreted = true;
      ++info_.interpreted;
      info_.interpreted_why += (info_.interpreted_why.empty() ? "" : "; ") + std::string("step ") +
                               std::to_string(s) + " (" + ir::kind_name(st.spec->kind) + "): " + why;
    }
    for (size_t b = nb; b < prog.buffers.size(); ++b) temp_step.push_back(static_cast<int>(s));
    es.k1 = static_cast<int>(prog.kernels.size());
    m.steps.push_back(es);
  }
  info_.generated_kernels = static_cast<int64_t>(prog.kernels.size());
  if (const char* pr = std::getenv("LUMINAL_CPU_PROFILE"); pr && *pr == '1') {
    m.profile = true;
    m.kernel_seconds.assign(prog.kernels.size(), 0);
  }

  // Lifetimes at plan-step granularity (a step's temporaries and result overlap
  // everything the step touches).
  const size_t nb = prog.buffers.size();
  m.lifetimes.assign(nb, {});
  m.in_arena.assign(nb, 0);
  m.dtype_bytes.resize(nb);
  for (size_t b = 0; b < nb; ++b) m.dtype_bytes[b] = dtype_size(prog.buffers[b].dtype);
  const int end = static_cast<int>(p.steps.size());
  for (size_t s = 0; s < p.steps.size(); ++s) {
    const uint32_t r = p.steps[s].result;
    if (prog.buffers[r].role == kernel::BufferRole::Intermediate) {
      m.in_arena[r] = 1;
      m.lifetimes[r].first_def = m.lifetimes[r].last_use = static_cast<int>(s);
    }
  }
  for (size_t s = 0; s < p.steps.size(); ++s)
    for (uint32_t a : p.steps[s].args)
      if (m.in_arena[a]) m.lifetimes[a].last_use = std::max(m.lifetimes[a].last_use, static_cast<int>(s));
  for (const auto& [name, v] : p.outputs)
    if (m.in_arena[v]) m.lifetimes[v].last_use = end;
  for (size_t b = nv; b < nb; ++b) {
    m.in_arena[b] = 1;
    m.lifetimes[b].first_def = m.lifetimes[b].last_use = temp_step[b - nv];
  }

  // The fast call path: leaves, variables, and whether every declared dim is plain.
  if (m.graph) {
    const detail::GraphImpl& g = *m.graph;
    std::map<std::string, detail::VarRange> vars;
    for (uint32_t id : detail::live_nodes(g)) {
      const detail::Node& n = g.nodes[id];
      for (const Dim& d : n.shape) detail::collect_vars(d, vars);
      if (n.op == detail::PrimOp::Slice || n.op == detail::PrimOp::Pad) {
        detail::collect_vars(n.start, vars);
        detail::collect_vars(n.end, vars);
      }
    }
    for (uint32_t id : g.inputs)
      for (const Dim& d : g.nodes[id].shape) detail::collect_vars(d, vars);
    for (uint32_t id : g.params)
      for (const Dim& d : g.nodes[id].shape) detail::collect_vars(d, vars);
    for (const auto& [name, r] : vars) {
      m.var_names.push_back(name);
      m.var_range.push_back(r);
    }
    auto add_leaf = [&](uint32_t id, bool param) {
      Impl::Leaf l;
      l.node = &g.nodes[id];
      l.param = param;
      for (size_t v = 0; v < p.leaf_name.size(); ++v)
        if (p.leaf_name[v] == l.node->name) l.value = static_cast<int>(v);
      m.leaves.push_back(l);
    };
    for (uint32_t id : g.inputs) add_leaf(id, false);
    m.n_inputs = m.leaves.size();
    for (uint32_t id : g.params) add_leaf(id, true);
    std::vector<bool> solvable(m.var_names.size(), false);
    bool plain = true;
    for (auto& l : m.leaves)
      for (const Dim& d : l.node->shape) {
        l.axis_var.push_back(-1);
        if (d.is_constant()) continue;
        const detail::Atom* a = detail::as_single_atom(d);
        if (!a || a->kind != detail::AtomKind::Var) {
          plain = false;
          continue;
        }
        for (size_t i = 0; i < m.var_names.size(); ++i)
          if (m.var_names[i] == a->name) {
            solvable[i] = true;
            l.axis_var.back() = static_cast<int>(i);
          }
      }
    for (bool b : solvable) plain = plain && b;
    for (const auto& sym : prog.symbols) {
      int vi = -1;
      for (size_t i = 0; i < m.var_names.size(); ++i)
        if (m.var_names[i] == sym) vi = static_cast<int>(i);
      if (vi < 0) plain = false;
      m.sym_var.push_back(vi);
    }
    m.fast_ok = plain && info_.interpreted == 0;
  }

  // Render and compile (or load the prebuilt library).
  const auto t0 = t_lower;
  if (!prog.kernels.empty()) {
    CProgram cp = render_c(prog);
    source_ = std::move(cp.source);
    info_.source_hash = hash_hex(source_);
    // LUMINAL_DUMP_C=path: the generated translation unit, for reading and profiling.
    if (const char* dump = std::getenv("LUMINAL_DUMP_C"); dump && *dump) {
      if (FILE* f = std::fopen(dump, "w")) {
        std::fputs(source_.c_str(), f);
        std::fputs(("\n/* kernel IR\n" + kernel::to_string(prog) + "*/\n").c_str(), f);
        std::fclose(f);
      }
    }
    if (!opt.prebuilt_so_path.empty()) {
      if (opt.prebuilt_source_hash != info_.source_hash)
        throw CompileError(
            "[load] the saved program's code does not match this build of Luminal (source hash " +
            opt.prebuilt_source_hash + ", rendered " + info_.source_hash + "): recompile and save it again");
      void* h = ::dlopen(opt.prebuilt_so_path.c_str(), RTLD_NOW | RTLD_LOCAL);
      if (!h) {
        const char* e = ::dlerror();
        throw CompileError("[load] cannot load the saved code " + opt.prebuilt_so_path + ": " +
                           (e ? e : "?"));
      }
      m.lib = std::make_shared<const JitLibrary>(h, opt.prebuilt_so_path);
    } else {
      m.lib = jit_for(opt.cache_dir).compile(source_);
    }
    for (const auto& name : cp.kernels) m.fns.push_back(m.lib->function<KernelFn>(name));
  }
  info_.jit_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

  // Report the arena at the dims' upper bounds (the size a call may need at most).
  std::vector<int64_t> key;
  for (const auto& s : prog.symbols) {
    (void)s;
    key.push_back(0);
  }
  if (key.empty()) {
    const std::shared_ptr<const Layout> l = m.layout(key);
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
    if (m.kernel_seconds[k] > 0.01 * total)
      std::fprintf(stderr, "  %-10s %6.1f%%  %.3f s\n", m.prog.kernels[k].name.c_str(),
                   100 * m.kernel_seconds[k] / total, m.kernel_seconds[k]);
}

std::string CpuExecutable::library_path() const { return impl_->lib ? impl_->lib->path() : std::string(); }

std::map<std::string, HostTensor> CpuExecutable::run(
    const DimBindings& dims, const std::map<std::string, const HostTensor*>& tensors) const {
  std::map<std::string, HostTensor> out;
  run_into(dims, tensors, out);
  return out;
}

void CpuExecutable::run_into(const DimBindings& dims, const std::map<std::string, const HostTensor*>& tensors,
                             std::map<std::string, HostTensor>& outputs) const {
  const Impl& m = *impl_;
  const compiler::KernelPlan& p = *plan_;
  std::vector<int64_t> vals(m.var_names.size());
  for (size_t i = 0; i < vals.size(); ++i) {
    auto it = dims.find(m.var_names[i]);
    if (it == dims.end()) throw RuntimeError("[cpu] dim '" + m.var_names[i] + "' is not bound");
    vals[i] = it->second;
  }
  std::vector<const std::byte*> leaf(p.leaf_name.size(), nullptr);
  for (size_t v = 0; v < p.leaf_name.size(); ++v) {
    if (p.leaf_name[v].empty()) continue;
    auto it = tensors.find(p.leaf_name[v]);
    if (it == tensors.end() || !it->second)
      throw RuntimeError("[compiled program] no data for '" + p.leaf_name[v] + "'");
    leaf[v] = it->second->data();
  }
  execute(vals.data(), leaf.data(), &dims, outputs);
}

bool CpuExecutable::try_run_fast(const std::map<std::string, HostTensor>& inputs,
                                 const std::map<std::string, std::shared_ptr<const HostTensor>>& params,
                                 std::map<std::string, HostTensor>& outputs) const {
  const Impl& m = *impl_;
  if (!m.fast_ok || inputs.size() != m.n_inputs) return false;
  const compiler::KernelPlan& p = *plan_;
  thread_local std::vector<int64_t> vals;
  thread_local std::vector<uint8_t> bound;
  thread_local std::vector<const std::byte*> leaf;
  vals.assign(m.var_names.size(), 0);
  bound.assign(m.var_names.size(), 0);
  leaf.assign(p.leaf_name.size(), nullptr);
  for (size_t li = 0; li < m.leaves.size(); ++li) {
    const Impl::Leaf& l = m.leaves[li];
    const HostTensor* t = nullptr;
    if (!l.param) {
      auto it = inputs.find(l.node->name);
      if (it == inputs.end()) return false;
      t = &it->second;
    } else {
      auto it = params.find(l.node->name);
      if (it == params.end() || !it->second) return false;
      t = it->second.get();
    }
    if (t->dtype() != l.node->dtype || t->shape().size() != l.node->shape.size()) return false;
    for (size_t a = 0; a < l.node->shape.size(); ++a) {
      const Dim& d = l.node->shape[a];
      const int64_t v = t->shape()[a];
      if (auto c = d.as_constant()) {
        if (*c != v) return false;
        continue;
      }
      if (l.axis_var[a] < 0) return false;
      const auto i = static_cast<size_t>(l.axis_var[a]);
      if (bound[i]) {
        if (vals[i] != v) return false;
        continue;
      }
      const detail::VarRange& r = m.var_range[i];
      if (v < r.lo || v > r.hi || (r.multiple > 1 && v % r.multiple != 0)) return false;
      vals[i] = v;
      bound[i] = 1;
    }
    if (l.value >= 0) leaf[static_cast<size_t>(l.value)] = t->data();
  }
  for (uint8_t b : bound)
    if (!b) return false;
  for (const detail::Guard& gd : m.graph->guards) {
    int64_t a = 0, b = 0;
    if (!eval_dim(gd.a, m.var_names, vals.data(), a) || !eval_dim(gd.b, m.var_names, vals.data(), b))
      return false;
    if (gd.less_equal ? a > b : a != b) return false;
  }
  execute(vals.data(), leaf.data(), nullptr, outputs);
  return true;
}

void CpuExecutable::execute(const int64_t* var_values, const std::byte* const* leaf_data,
                            const DimBindings* dims, std::map<std::string, HostTensor>& outputs) const {
  const Impl& m = *impl_;
  const compiler::KernelPlan& p = *plan_;
  const kernel::Program& prog = m.prog;

  // symbols -> layout (cached per binding) -> arena
  thread_local std::vector<int64_t> key;
  key.resize(prog.symbols.size());
  for (size_t i = 0; i < prog.symbols.size(); ++i) key[i] = var_values[m.sym_var[i]];
  const std::shared_ptr<const Layout> lay_ref = m.layout(key);
  const Layout& lay = *lay_ref;
  Arena* arena = m.acquire(lay.arena_bytes);
  struct Give {
    const Impl& m;
    Arena* a;
    ~Give() { m.release(a); }
  } give{m, arena};
  for (size_t i = 0; i < key.size(); ++i) arena->syms[i] = key[i];

  std::vector<void*>& ptr = arena->ptrs;
  for (size_t b = 0; b < prog.buffers.size(); ++b)
    ptr[b] = lay.offset[b] != kNone ? static_cast<void*>(arena->mem.get() + lay.offset[b]) : nullptr;
  for (size_t v = 0; v < p.leaf_name.size(); ++v)
    if (!p.leaf_name[v].empty())
      ptr[v] = const_cast<std::byte*>(leaf_data[v]);  // kernels never store to leaves
  auto dim_value = [&](const Dim& d) {
    int64_t x = 0;
    if (!eval_dim(d, m.var_names, var_values, x))
      throw RuntimeError("[cpu] cannot evaluate dim " + d.to_string());
    return x;
  };
  auto out_shape = [&](uint32_t v) {
    std::vector<int64_t> s;
    for (const Dim& d : m.value_shape[v]) s.push_back(dim_value(d));
    return s;
  };
  auto shape_is = [&](const HostTensor& t, uint32_t v) {
    const auto& want = m.value_shape[v];
    if (t.shape().size() != want.size()) return false;
    for (size_t i = 0; i < want.size(); ++i)
      if (t.shape()[i] != dim_value(want[i])) return false;
    return true;
  };
  // Outputs written in place: reuse a matching writable entry, else make one.
  for (size_t o = 0; o < p.outputs.size(); ++o) {
    const uint32_t v = p.outputs[o].second;
    if (m.direct_output[v] != static_cast<int>(o)) continue;
    const std::string& name = p.outputs[o].first;
    const DType dt = prog.buffers[v].dtype;
    auto it = outputs.find(name);
    const bool reuse = it != outputs.end() && it->second.dtype() == dt && it->second.is_writable() &&
                       shape_is(it->second, v);
    if (!reuse) it = outputs.insert_or_assign(name, HostTensor(dt, out_shape(v))).first;
    ptr[v] = it->second.mutable_data();
  }

  const LmRuntime* rt = runtime_table();
  for (size_t s = 0; s < m.steps.size(); ++s) {
    const Impl::Step& es = m.steps[s];
    if (!es.interpreted) {
      for (int k = es.k0; k < es.k1; ++k) {
        if (const auto& g = prog.kernels[static_cast<size_t>(k)].gather)
          check_gather_ids(*g, ptr[static_cast<size_t>(g->ids)], lay.gather_dims[static_cast<size_t>(k)]);
        if (!m.profile) {
          m.fns[static_cast<size_t>(k)](ptr.data(), arena->syms.data(), rt);
          continue;
        }
        const auto t0 = std::chrono::steady_clock::now();
        m.fns[static_cast<size_t>(k)](ptr.data(), arena->syms.data(), rt);
        m.kernel_seconds[static_cast<size_t>(k)] +=
            std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      }
      continue;
    }
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
  // Outputs not written in place: leaves and repeated values are copied.
  for (size_t o = 0; o < p.outputs.size(); ++o) {
    const uint32_t v = p.outputs[o].second;
    if (m.direct_output[v] == static_cast<int>(o)) continue;
    const std::string& name = p.outputs[o].first;
    std::vector<int64_t> shape;
    DType dt = prog.buffers[v].dtype;
    const void* data = ptr[v];
    if (!p.leaf_name[v].empty()) {
      const detail::Node* n = nullptr;
      for (const auto& l : m.leaves)
        if (l.node->name == p.leaf_name[v]) n = l.node;
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
