// Plan -> kernel::Program (see the header).
#include "backends/cpu/cpu_program.hpp"

#include <algorithm>
#include <cstdlib>
#include <unordered_map>

#include "luminal/error.hpp"

#include "backends/cpu/gemm_codegen.hpp"
#include "cost/gpu_launch.hpp"
#include "kernel/buffer_access.hpp"
#include "ir/tensor_lang.hpp"

namespace luminal::cpu {

namespace {

// The node giving each plan value its dtype and shape: a step's result is its body's
// output; a leaf takes the Input node of the first step that reads it ("%<slot>").
std::vector<const detail::Node*> value_nodes(const compiler::KernelPlan& p) {
  std::vector<const detail::Node*> out(p.leaf_name.size(), nullptr);
  for (const auto& st : p.steps) {
    const auto& body = *st.spec->body;
    out[st.result] = &body.nodes[body.outputs.at(0).second];
    for (const auto& n : body.nodes)
      if (n.op == detail::PrimOp::Input && n.name.size() > 1 && n.name[0] == '%') {
        const size_t s = static_cast<size_t>(std::strtoul(n.name.c_str() + 1, nullptr, 10));
        if (s < st.args.size() && !out[st.args[s]]) out[st.args[s]] = &n;
      }
  }
  return out;
}

// One buffer per plan value, in value order; a param in `blocks` is stored as that block.
void add_value_buffers(const compiler::KernelPlan& p, const ParamBlocks& blocks, LoweredPlan& out) {
  const size_t nv = p.leaf_name.size();
  out.direct_output.assign(nv, -1);
  for (size_t o = 0; o < p.outputs.size(); ++o) {
    const uint32_t v = p.outputs[o].second;
    if (p.leaf_name[v].empty() && out.direct_output[v] < 0) out.direct_output[v] = static_cast<int>(o);
  }
  const std::vector<const detail::Node*> node = value_nodes(p);
  out.value_shape.resize(nv);
  for (size_t v = 0; v < nv; ++v) {
    if (node[v]) out.value_shape[v] = node[v]->shape;
    kernel::Buffer b;
    // not "v" + to_string(v): GCC 12 warns falsely (-Wrestrict) on that form
    b.name = p.leaf_name[v].empty() ? std::to_string(v).insert(0, 1, 'v') : p.leaf_name[v];
    if (node[v]) {
      b.dtype = node[v]->dtype;
      b.elements = kernel::Index(1);
      for (const Dim& d : node[v]->shape) b.elements = b.elements * kernel::lower::dim_index(d, out.prog);
    } else {
      b.elements = kernel::Index(0);  // a leaf only passed through to an output (copied from the caller)
    }
    b.role = !p.leaf_name[v].empty()
                 ? (p.leaf_is_param[v] ? kernel::BufferRole::Param : kernel::BufferRole::Input)
             : out.direct_output[v] >= 0 ? kernel::BufferRole::Output
                                         : kernel::BufferRole::Intermediate;
    auto blk = b.role == kernel::BufferRole::Param && node[v] ? blocks.find(p.leaf_name[v]) : blocks.end();
    if (blk != blocks.end() && blk->second.start.size() == node[v]->shape.size()) {
      kernel::BufferBlock bb{blk->second.start, {}};
      b.elements = kernel::Index(1);
      for (size_t a = 0; a < bb.start.size(); ++a) {
        bb.dims.push_back(blk->second.end[a] - blk->second.start[a]);
        b.elements = b.elements * kernel::Index(bb.dims.back());
      }
      out.prog.blocks.emplace(static_cast<int>(v), std::move(bb));
    }
    out.prog.buffers.push_back(b);
  }
}

// Repeated steps (a model's layers replay one block's plan) lower to the same kernels up
// to buffer ids and names: the first copy is lowered, the others are copies of its
// kernels with the buffers renamed. Lowering 12 layers of a 110M-parameter Llama took
// most of a cached compile (~50 of 80 ms) before.
struct Lowered {
  std::vector<int> args;
  int result = 0;
  std::string name;
  size_t k0 = 0, k1 = 0;  // its kernels
  size_t b0 = 0, b1 = 0;  // its temporaries
};

struct SpecKey {
  const ir::KernelSpec* spec;
  bool operator==(const SpecKey& o) const { return spec == o.spec || *spec == *o.spec; }
};
struct SpecHash {
  size_t operator()(const SpecKey& k) const { return static_cast<size_t>(k.spec->hash); }
};

/// Same aliasing among the arguments and the result (a step reading one buffer twice
/// lowers differently from one reading two).
bool same_aliasing(const std::vector<int>& a, int ra, const std::vector<int>& b, int rb) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if ((a[i] == ra) != (b[i] == rb)) return false;
    for (size_t j = i + 1; j < a.size(); ++j)
      if ((a[i] == a[j]) != (b[i] == b[j])) return false;
  }
  return true;
}

class Remap {
 public:
  explicit Remap(std::vector<int> to) : to_(std::move(to)) {}
  int buf(int b) const {
    if (b < 0 || static_cast<size_t>(b) >= to_.size() || to_[static_cast<size_t>(b)] < 0)
      throw InternalError("[cpu] repeated step reads an unmapped buffer");
    return to_[static_cast<size_t>(b)];
  }
  kernel::Expr expr(const kernel::Expr& e) {
    if (!e.valid()) return e;
    auto it = memo_.find(&e.node());
    if (it != memo_.end()) return it->second;
    const kernel::ExprNode& n = e.node();
    std::vector<kernel::Expr> a;
    for (const auto& x : n.args) a.push_back(expr(x));
    kernel::Expr r;
    switch (n.op) {
      case kernel::ExprOp::Const:
        r = kernel::constant(n.constant, n.dtype);
        break;
      case kernel::ExprOp::Load:
        r = n.valid ? kernel::load_padded(buf(n.buffer), n.dtype, n.index, *n.valid, n.fill)
                    : kernel::load(buf(n.buffer), n.dtype, n.index);
        break;
      case kernel::ExprOp::Acc:
        r = kernel::acc(n.dtype, n.slot);
        break;
      case kernel::ExprOp::IndexValue:
        r = kernel::index_value(n.index);
        break;
      case kernel::ExprOp::Unary:
        r = kernel::unary(n.unary, a.at(0));
        break;
      case kernel::ExprOp::Binary:
        r = kernel::binary(n.binary, a.at(0), a.at(1));
        break;
      case kernel::ExprOp::Where:
        r = kernel::where(a.at(0), a.at(1), a.at(2));
        break;
      case kernel::ExprOp::Cast:
        r = kernel::cast(a.at(0), n.dtype);
        break;
    }
    if (r.dtype() != n.dtype) throw InternalError("[cpu] repeated step: dtype changed in a copy");
    memo_.emplace(&e.node(), r);
    return r;
  }
  kernel::Kernel kernel(const kernel::Kernel& k) {
    kernel::Kernel c = k;
    switch (k.kind) {
      case kernel::KernelKind::Elementwise:
      case kernel::KernelKind::Reduction:
        c.store.buffer = buf(k.store.buffer);
        c.store.value = expr(k.store.value);
        if (c.reduce) {
          c.reduce->value = expr(k.reduce->value);
          for (kernel::Accumulator& m : c.reduce->more) m.value = expr(m.value);
        }
        break;
      case kernel::KernelKind::Gemm:
        if (k.gemm->a_prologue) {
          c.gemm->a_prologue->stat.value = expr(k.gemm->a_prologue->stat.value);
          c.gemm->a_prologue->a = expr(k.gemm->a_prologue->a);
        } else {
          c.gemm->a.buffer = buf(k.gemm->a.buffer);
        }
        c.gemm->b.buffer = buf(k.gemm->b.buffer);
        for (kernel::GemmSegment& sg : c.gemm->b_segments) sg.b.buffer = buf(sg.b.buffer);
        c.gemm->c.buffer = buf(k.gemm->c.buffer);
        c.gemm->epilogue = expr(k.gemm->epilogue);
        break;
      case kernel::KernelKind::Gather:
        c.gather->table = buf(k.gather->table);
        c.gather->ids = buf(k.gather->ids);
        c.gather->out = buf(k.gather->out);
        break;
      case kernel::KernelKind::Attention:
        c.attention->q = expr(k.attention->q);
        c.attention->k = expr(k.attention->k);
        for (kernel::KeyExprSegment& sg : c.attention->k_more) sg.k = expr(sg.k);
        c.attention->v.buffer = buf(k.attention->v.buffer);
        for (kernel::KeySegment& sg : c.attention->v_more) sg.v.buffer = buf(sg.v.buffer);
        c.attention->out.buffer = buf(k.attention->out.buffer);
        c.attention->score = expr(k.attention->score);
        c.attention->epilogue = expr(k.attention->epilogue);
        if (c.attention->split) {
          c.attention->split->partial = buf(k.attention->split->partial);
          c.attention->split->counter = buf(k.attention->split->counter);
        }
        break;
      default:  // a kind this copier does not know: lower the step afresh
        throw InternalError("[cpu] repeated step: unknown kernel kind");
    }
    return c;
  }

 private:
  std::vector<int> to_;
  std::unordered_map<const kernel::ExprNode*, kernel::Expr> memo_;
};

std::string renamed(const std::string& s, const std::string& from, const std::string& to) {
  return s.rfind(from, 0) == 0 ? to + s.substr(from.size()) : to + "_" + s;
}

/// Appends a copy of `first`'s kernels and temporaries for a step with the same spec;
/// false (nothing appended) when the copy cannot be made safely.
bool copy_lowered(const Lowered& first, const std::vector<int>& args, int result, const std::string& name,
                  kernel::Program& prog) {
  if (!same_aliasing(first.args, first.result, args, result)) return false;
  for (size_t i = 0; i < args.size(); ++i) {  // a param stored as a block is indexed as one
    const kernel::BufferBlock *a = prog.block(first.args[i]), *b = prog.block(args[i]);
    if ((a == nullptr) != (b == nullptr) || (a && !(*a == *b))) return false;
  }
  std::vector<int> to(prog.buffers.size() + (first.b1 - first.b0), -1);
  for (size_t i = 0; i < args.size(); ++i) to[static_cast<size_t>(first.args[i])] = args[i];
  to[static_cast<size_t>(first.result)] = result;
  const size_t nb = prog.buffers.size(), nk = prog.kernels.size();
  for (size_t b = first.b0; b < first.b1; ++b) {
    kernel::Buffer t = prog.buffers[b];
    t.name = renamed(t.name, first.name, name);
    to[b] = static_cast<int>(prog.buffers.size());
    prog.buffers.push_back(std::move(t));
  }
  // The packs the first step made: the same of this step's params, none of them packed yet
  // (else it is lowered afresh, which reuses or declines a pack).
  const size_t np = prog.packs.size();
  for (size_t p = 0; p < np; ++p) {
    const kernel::ParamPack pk = prog.packs[p];
    if (pk.buffer < static_cast<int>(first.b0) || pk.buffer >= static_cast<int>(first.b1)) continue;
    kernel::ParamPack copy{to[static_cast<size_t>(pk.buffer)], {}};
    for (int mb : pk.members) {
      const int t = to[static_cast<size_t>(mb)];
      if (t < 0 || prog.pack_holding(t) ||
          std::find(copy.members.begin(), copy.members.end(), t) != copy.members.end()) {
        prog.buffers.resize(nb);
        prog.packs.resize(np);
        return false;
      }
      copy.members.push_back(t);
    }
    prog.packs.push_back(std::move(copy));
  }
  try {
    Remap m(std::move(to));
    for (size_t k = first.k0; k < first.k1; ++k) {
      kernel::Kernel c = m.kernel(prog.kernels[k]);
      c.name = renamed(c.name, first.name, name);
      prog.kernels.push_back(std::move(c));
    }
  } catch (const InternalError&) {
    prog.buffers.resize(nb);
    prog.kernels.resize(nk);
    prog.packs.resize(np);
    return false;
  }
  return true;
}

}  // namespace

kernel::GemmTile cpu_gemm_tile(const ir::KernelSpec& spec) {
  // The micro tile the search chose (a TargetDesc::gemm_tiles entry: launch = {mr, nr,
  // kc}), when this ISA's register file holds it; cache blocks stay the ISA's defaults,
  // rounded to the tile.
  const CpuIsa isa = host_isa();
  const auto def = default_gemm_tile(isa);
  kernel::GemmTile t{def.mr, def.nr, def.mc, def.kc, def.nc};
  if (spec.launch.size() == 3) {
    const int mr = static_cast<int>(spec.launch[0]), nr = static_cast<int>(spec.launch[1]);
    if (micro_tile_fits(isa, mr, nr)) {
      t.mr = mr;
      t.nr = nr;
      t.kc = static_cast<int>(spec.launch[2]);
      t.mc = std::max(mr, def.mc / mr * mr);
      t.nc = std::max(nr, def.nc / nr * nr);
    }
  }
  return t;
}

kernel::lower::Options cpu_lower_options() {
  kernel::lower::Options opt;
  opt.gemm_tile = cpu_gemm_tile;
  opt.segmented_b = true;  // the C GEMM driver reads a segmented B (gemm_codegen.hpp)
  return opt;
}

namespace {

// Kernels that ride in another's launch (lower::Options::side_work): a plan step whose one
// kernel is small and elementwise, and that created no temporaries, becomes
//  * the tail work of the kernel just before it (kernel::Kernel::tail) -- run by that
//    launch's last block once all its blocks have stored -- when that kernel is generated
//    device code (not a library call) and nothing but such tails lies between them: a
//    decode step's new K row (its RoPE) and V row after the QKV projection they slice;
//  * else the side work of a later step's first kernel (kernel::Kernel::side) -- extra
//    blocks of its launch -- when no kernel up to that one reads what it writes or writes
//    what it reads (so running it later changes nothing) and no host work (the
//    interpreter, a collective) lies between.
bool fits(const kernel::Kernel& e, int64_t most) {
  if (e.kind != kernel::KernelKind::Elementwise || !e.tail.empty()) return false;
  kernel::Index n(1);
  for (const kernel::Loop& l : e.loops) n = n * l.extent;
  const auto c = n.as_constant();
  return c && *c <= most;
}

bool small_elementwise(const kernel::Kernel& k) {
  if (!fits(k, detail::kSideWorkMaxElements)) return false;
  for (const kernel::Kernel& sd : k.side)
    if (!fits(sd, detail::kSideWorkMaxElements)) return false;
  return true;
}

bool conflicts(const kernel::BufferAccess& e, const kernel::BufferAccess& other) {
  auto meets = [](const std::vector<int>& a, const std::vector<int>& b) {
    for (int x : a)
      if (std::find(b.begin(), b.end(), x) != b.end()) return true;
    return false;
  };
  return meets(e.writes, other.reads) || meets(e.writes, other.writes) || meets(e.reads, other.writes);
}

// Step s's kernel now runs in step t's launch (and so does every step that ran in s's).
void runs_in(LoweredPlan& out, size_t s, size_t t) {
  out.steps[s].k1 = out.steps[s].k0;  // no kernel of its own (renumbered at the end)
  for (int& r : out.runs_at)
    if (r == static_cast<int>(s)) r = static_cast<int>(t);
}

void fold_tails(LoweredPlan& out, const std::vector<int>& temps, std::vector<uint8_t>& moved) {
  std::vector<kernel::Kernel>& ks = out.prog.kernels;
  int last = -1;  // the step whose last kernel is the latest one so far (-1: none, or host work since)
  for (size_t s = 0; s < out.steps.size(); ++s) {
    const PlanStep& es = out.steps[s];
    if (es.interpreted || es.collective) {
      last = -1;
      continue;
    }
    if (es.k0 == es.k1) continue;
    const auto e = static_cast<size_t>(es.k0);
    if (last >= 0 && es.k1 - es.k0 == 1 && temps[s] == 0 && ks[e].side.empty() &&
        fits(ks[e], detail::kTailWorkMaxElements)) {
      kernel::Kernel& host = ks[static_cast<size_t>(out.steps[static_cast<size_t>(last)].k1 - 1)];
      if (!(host.gemm && host.gemm->impl == kernel::GemmImpl::Library)) {
        if (host.tail_counter < 0) {
          host.tail_counter = static_cast<int>(out.prog.buffers.size());
          out.prog.buffers.push_back(
              {host.name + "_tail_count", DType::i32, kernel::Index(1), kernel::BufferRole::State});
          out.temp_step.push_back(last);
        }
        host.tail.push_back(std::move(ks[e]));
        moved[e] = 1;
        runs_in(out, s, static_cast<size_t>(last));
        ++out.tail_kernels;
        continue;
      }
    }
    last = static_cast<int>(s);
  }
}

void fold_sides(LoweredPlan& out, const std::vector<int>& temps, std::vector<uint8_t>& moved) {
  std::vector<kernel::Kernel>& ks = out.prog.kernels;
  for (size_t s = 0; s < out.steps.size(); ++s) {
    const PlanStep& es = out.steps[s];
    if (es.interpreted || es.collective || es.k1 - es.k0 != 1 || temps[s] > 0) continue;
    const auto e = static_cast<size_t>(es.k0);
    if (!small_elementwise(ks[e])) continue;
    const kernel::BufferAccess ea = kernel::buffer_access(ks[e]);
    for (size_t t = s + 1; t < out.steps.size(); ++t) {
      const PlanStep& ht = out.steps[t];
      if (ht.interpreted || ht.collective) break;
      if (ht.k0 == ht.k1) continue;  // runs in another step's launch, checked there
      const auto h = static_cast<size_t>(ht.k0);
      if (conflicts(ea, kernel::buffer_access(ks[h]))) break;
      if (ks[h].kind != kernel::KernelKind::Gemm && ks[h].kind != kernel::KernelKind::Gather) {
        kernel::Kernel k = std::move(ks[e]);
        std::vector<kernel::Kernel> its = std::move(k.side);
        k.side.clear();
        ks[h].side.push_back(std::move(k));
        for (auto& sd : its) ks[h].side.push_back(std::move(sd));
        moved[e] = 1;
        runs_in(out, s, t);
        ++out.side_kernels;
        break;
      }
      bool later = false;  // the rest of step t's kernels must not meet E either
      for (int k = ht.k0 + 1; k < ht.k1 && !later; ++k)
        later = conflicts(ea, kernel::buffer_access(ks[static_cast<size_t>(k)]));
      if (later) break;
    }
  }
}

}  // namespace

void fold_side_work(LoweredPlan& out) {
  std::vector<kernel::Kernel>& ks = out.prog.kernels;
  std::vector<uint8_t> moved(ks.size(), 0);
  std::vector<int> temps(out.steps.size(), 0);
  for (int s : out.temp_step) ++temps[static_cast<size_t>(s)];
  fold_tails(out, temps, moved);
  fold_sides(out, temps, moved);
  if (out.side_kernels + out.tail_kernels == 0) return;
  std::vector<int> index(ks.size() + 1, 0);  // old kernel index -> new
  std::vector<kernel::Kernel> kept;
  for (size_t k = 0; k < ks.size(); ++k) {
    index[k] = static_cast<int>(kept.size());
    if (!moved[k]) kept.push_back(std::move(ks[k]));
  }
  index[ks.size()] = static_cast<int>(kept.size());
  for (PlanStep& es : out.steps) {
    const bool none = es.k0 == es.k1;
    es.k0 = index[static_cast<size_t>(es.k0)];
    es.k1 = none ? es.k0 : index[static_cast<size_t>(es.k1)];
  }
  ks = std::move(kept);
}

LoweredPlan lower_plan(const compiler::KernelPlan& p, kernel::lower::Options opt, const ParamBlocks& blocks) {
  if (!opt.gemm_tile) opt.gemm_tile = cpu_gemm_tile;
  LoweredPlan out;
  out.prog.approximate_math = p.fast_math;
  add_value_buffers(p, blocks, out);
  std::unordered_map<SpecKey, Lowered, SpecHash> lowered;
  for (size_t s = 0; s < p.steps.size(); ++s) {
    const auto& st = p.steps[s];
    std::vector<int> args(st.args.begin(), st.args.end());
    PlanStep ps;
    ps.k0 = static_cast<int>(out.prog.kernels.size());
    const size_t nb = out.prog.buffers.size();
    const std::string name = std::to_string(s).insert(0, 1, 'k');
    auto seen = lowered.find(SpecKey{st.spec.get()});
    if (st.spec->kind != ir::KernelKind::Collective && seen != lowered.end() &&
        copy_lowered(seen->second, args, static_cast<int>(st.result), name, out.prog)) {
      for (size_t b = nb; b < out.prog.buffers.size(); ++b) out.temp_step.push_back(static_cast<int>(s));
      ps.k1 = static_cast<int>(out.prog.kernels.size());
      out.steps.push_back(ps);
      continue;
    }
    if (st.spec->kind == ir::KernelKind::Collective) {
      ps.collective = true;  // no kernel: the executable calls the communicator
    } else if (auto failed = kernel::lower::lower_spec(*st.spec, args, static_cast<int>(st.result), name,
                                                       out.prog, opt)) {
      ps.interpreted = true;
      ++out.interpreted;
      out.interpreted_why += (out.interpreted_why.empty() ? "" : "; ") + std::string("step ") +
                             std::to_string(s) + " (" + ir::kind_name(st.spec->kind) + "): " + failed->why;
    } else if (seen == lowered.end()) {
      lowered.emplace(SpecKey{st.spec.get()}, Lowered{args, static_cast<int>(st.result), name,
                                                      static_cast<size_t>(ps.k0), out.prog.kernels.size(), nb,
                                                      out.prog.buffers.size()});
    }
    for (size_t b = nb; b < out.prog.buffers.size(); ++b) out.temp_step.push_back(static_cast<int>(s));
    ps.k1 = static_cast<int>(out.prog.kernels.size());
    out.steps.push_back(ps);
  }
  // The interpreter reads a step's arguments as whole tensors of their declared shapes: a
  // param such a step reads is stored whole instead (lowered again without its block).
  ParamBlocks kept = blocks;
  for (size_t s = 0; s < p.steps.size(); ++s)
    if (out.steps[s].interpreted)
      for (uint32_t a : p.steps[s].args)
        if (out.prog.block(static_cast<int>(a))) kept.erase(p.leaf_name[a]);
  if (kept.size() != blocks.size()) return lower_plan(p, std::move(opt), kept);
  out.runs_at.resize(p.steps.size());
  for (size_t s = 0; s < p.steps.size(); ++s) out.runs_at[s] = static_cast<int>(s);
  if (opt.side_work) fold_side_work(out);
  return out;
}

ParamBlocks stored_blocks(const kernel::Program& prog) {
  ParamBlocks out;
  for (const auto& [id, b] : prog.blocks) {
    ParamRegion r{b.start, b.start};
    for (size_t a = 0; a < b.dims.size(); ++a) r.end[a] += b.dims[a];
    out.emplace(prog.buffers[static_cast<size_t>(id)].name, std::move(r));
  }
  return out;
}

}  // namespace luminal::cpu
