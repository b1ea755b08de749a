// Arena lifetimes and per-binding layouts (see the header).
#include "backends/cpu/arena_layout.hpp"

#include <algorithm>
#include <string>

#include "backends/cpu/gemm_codegen.hpp"
#include "backends/cpu/kernel_deps.hpp"
#include "luminal/error.hpp"

namespace luminal::cpu {

namespace {
// Above this (256 TiB) an arena cannot be allocated anywhere; sums below it cannot wrap.
constexpr int64_t kMaxArenaBytes = int64_t{1} << 48;

std::string binding_text(const std::map<std::string, int64_t>& syms) {
  std::string s;
  for (const auto& [name, v] : syms) s += (s.empty() ? "" : ", ") + name + " = " + std::to_string(v);
  return s.empty() ? "constant dims" : s;
}

bool uses_loop_var(const kernel::Index& i) {
  if (i.node().op == kernel::IndexOp::Var) return true;
  for (const auto& a : i.node().args)
    if (uses_loop_var(a)) return true;
  return false;
}

// The largest packing scratch one thread needs for the program's GEMMs under `syms`.
size_t gemm_scratch(const kernel::Program& prog, const std::map<std::string, int64_t>& syms) {
  int64_t most = 0;
  for (const auto& k : prog.kernels) {
    if (!k.gemm) continue;
    const kernel::Gemm& g = *k.gemm;
    const kernel::GemmTile& t = g.tile;
    int64_t need = 0;
    if (uses_loop_var(g.m) || uses_loop_var(g.n) || uses_loop_var(g.k)) {
      need = (int64_t{t.kc} * t.mc * 4 + 63) / 64 * 64 + (int64_t{t.kc} * t.nc * 4 + 63) / 64 * 64;
    } else {
      // A stride that varies with the batch is never 1 for sure: the packed path.
      auto stride = [&](const kernel::Index& i) {
        return uses_loop_var(i) ? int64_t{-1} : i.evaluate({}, syms);
      };
      need = gemm_scratch_bytes(g.m.evaluate({}, syms), g.n.evaluate({}, syms), g.k.evaluate({}, syms),
                                stride(g.a.col_stride), stride(g.b.row_stride), stride(g.b.col_stride), t.mr,
                                t.nr, t.mc, t.nc, t.kc);
    }
    most = std::max(most, need);
  }
  return static_cast<size_t>(most + kArenaAlign - 1) / kArenaAlign * kArenaAlign;
}

}  // namespace

ArenaBuffers arena_buffers(const compiler::KernelPlan& p, const LoweredPlan& lowered) {
  const kernel::Program& prog = lowered.prog;
  const size_t nb = prog.buffers.size(), nv = p.leaf_name.size();
  ArenaBuffers ab;
  ab.lifetimes.assign(nb, {});
  ab.in_arena.assign(nb, 0);
  ab.dtype_bytes.resize(nb);
  for (size_t b = 0; b < nb; ++b) ab.dtype_bytes[b] = dtype_size(prog.buffers[b].dtype);
  const int end = static_cast<int>(p.steps.size());
  // A step whose kernel runs in another step's launch (LoweredPlan::runs_at: earlier as
  // tail work, later as side work) reads its arguments and writes its result then.
  auto runs_at = [&](size_t s) {
    return s < lowered.runs_at.size() ? lowered.runs_at[s] : static_cast<int>(s);
  };
  for (size_t s = 0; s < p.steps.size(); ++s) {
    const uint32_t r = p.steps[s].result;
    if (prog.buffers[r].role == kernel::BufferRole::Intermediate) {
      ab.in_arena[r] = 1;
      ab.lifetimes[r].first_def = std::min(static_cast<int>(s), runs_at(s));
      ab.lifetimes[r].last_use = std::max(static_cast<int>(s), runs_at(s));
    }
  }
  for (size_t s = 0; s < p.steps.size(); ++s)
    for (uint32_t a : p.steps[s].args)
      if (ab.in_arena[a])
        ab.lifetimes[a].last_use = std::max({ab.lifetimes[a].last_use, static_cast<int>(s), runs_at(s)});
  for (const auto& [name, v] : p.outputs)
    if (ab.in_arena[v]) ab.lifetimes[v].last_use = end;
  for (size_t b = nv; b < nb; ++b) {
    ab.in_arena[b] = 1;
    ab.lifetimes[b].first_def = ab.lifetimes[b].last_use = lowered.temp_step[b - nv];
    // State (a counted split attention's counts): shared with no other buffer.
    if (prog.buffers[b].role == kernel::BufferRole::State) {
      ab.lifetimes[b].first_def = 0;
      ab.lifetimes[b].last_use = end;
    }
  }
  // Params stored packed (the emulated GPU lowering's): filled before the first step, read
  // by any step after.
  for (const kernel::ParamPack& pk : prog.packs) {
    ab.lifetimes[static_cast<size_t>(pk.buffer)].first_def = 0;
    ab.lifetimes[static_cast<size_t>(pk.buffer)].last_use = end;
  }
  return ab;
}

Layout plan_layout(const kernel::Program& prog, const ArenaBuffers& ab,
                   const std::vector<KernelAccess>& access, const std::vector<int64_t>& symbols) {
  std::map<std::string, int64_t> syms;
  for (size_t i = 0; i < prog.symbols.size(); ++i) syms[prog.symbols[i]] = symbols[i];
  Layout l;
  l.offset.assign(prog.buffers.size(), kNotInArena);
  l.elements.resize(prog.buffers.size());
  std::vector<kernel::BufferLifetime> lt;
  std::vector<size_t> ids;
  // Every size here comes from the caller's dims: checked, so that huge dims (P = 2^31,
  // a P x P intermediate) are a RuntimeError instead of a wrapped arena size.
  int64_t arena_sum = 0;
  for (size_t b = 0; b < prog.buffers.size(); ++b) {
    l.elements[b] = prog.buffers[b].elements.evaluate({}, syms);
    if (!ab.in_arena[b]) continue;
    kernel::BufferLifetime x = ab.lifetimes[b];
    int64_t bytes = 0;
    if (l.elements[b] < 0 || __builtin_mul_overflow(l.elements[b], static_cast<int64_t>(ab.dtype_bytes[b]), &bytes) ||
        __builtin_add_overflow(arena_sum, bytes + static_cast<int64_t>(kArenaAlign), &arena_sum) ||
        arena_sum > kMaxArenaBytes)
      throw RuntimeError("[call] the intermediates of this program need more than " +
                         std::to_string(kMaxArenaBytes) + " bytes with " + binding_text(syms) +
                         ": the dims are too large");
    x.bytes = static_cast<size_t>(bytes);
    lt.push_back(x);
    ids.push_back(b);
  }
  l.gather_dims.resize(prog.kernels.size());
  for (size_t k = 0; k < prog.kernels.size(); ++k)
    if (const auto& g = prog.kernels[k].gather)
      l.gather_dims[k] = {g->count.evaluate({}, syms), g->rows.evaluate({}, syms)};
  kernel::MemoryPlan mp = kernel::plan_memory(lt, kArenaAlign);
  for (size_t i = 0; i < ids.size(); ++i) l.offset[ids[i]] = mp.offsets[i];
  l.arena_bytes = (mp.arena_bytes + kArenaAlign - 1) / kArenaAlign * kArenaAlign;
  l.total_bytes = mp.total_bytes;
  l.scratch_per_thread = gemm_scratch(prog, syms);
  std::vector<BufferSpan> span(prog.buffers.size());
  for (size_t b = 0; b < span.size(); ++b)
    span[b] = l.offset[b] == kNotInArena
                  ? BufferSpan{false, b, b + 1}
                  : BufferSpan{true, l.offset[b],
                               l.offset[b] + static_cast<size_t>(l.elements[b]) * ab.dtype_bytes[b]};
  l.wait_before = wait_before(access, span);
  return l;
}

std::shared_ptr<const Layout> LayoutCache::get(const std::vector<int64_t>& symbols) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = layouts_.find(symbols);
  if (it != layouts_.end()) {
    it->second.last_use = ++clock_;
    return it->second.layout;
  }
  if (layouts_.size() >= kMaxLayouts) {
    auto oldest = layouts_.begin();
    for (auto i = layouts_.begin(); i != layouts_.end(); ++i)
      if (i->second.last_use < oldest->second.last_use) oldest = i;
    layouts_.erase(oldest);
  }
  auto l = std::make_shared<const Layout>(plan_layout(prog_, ab_, access_, symbols));
  layouts_.emplace(symbols, Entry{l, ++clock_});
  return l;
}

}  // namespace luminal::cpu
