// Kernel body -> kernel IR (see lower_spec.hpp).
#include "kernel/lower/lower_spec.hpp"

#include <algorithm>

#include "graph/dim_expr.hpp"
#include "kernel/lower/lowerer.hpp"

namespace luminal::kernel::lower {

kernel::Index dim_index(const Dim& d, kernel::Program& prog) {
  const auto& e = *d.expr();
  Index out(e.constant);
  for (const auto& t : e.terms) {
    Index term(t.coeff);
    for (const auto& a : t.atoms) {
      Index x;
      switch (a->kind) {
        case detail::AtomKind::Var:
          if (std::find(prog.symbols.begin(), prog.symbols.end(), a->name) == prog.symbols.end())
            prog.symbols.push_back(a->name);
          x = Index::sym(a->name);
          break;
        case detail::AtomKind::Div:
          x = kernel::floordiv(dim_index(a->a, prog), dim_index(a->b, prog));
          break;
        case detail::AtomKind::Mod:
          x = kernel::mod(dim_index(a->a, prog), dim_index(a->b, prog));
          break;
        case detail::AtomKind::Min:
          x = kernel::min(dim_index(a->a, prog), dim_index(a->b, prog));
          break;
        case detail::AtomKind::Max:
          x = kernel::max(dim_index(a->a, prog), dim_index(a->b, prog));
          break;
      }
      term = term * x;
    }
    out = out + term;
  }
  return out;
}

namespace {

// The declared least value of every dim variable in `d` (for index simplification).
void collect_sym_mins(const Dim& d, kernel::SymbolMins& out) {
  if (!d.expr()) return;
  for (const auto& t : d.expr()->terms)
    for (const auto& a : t.atoms) {
      if (a->kind == detail::AtomKind::Var) {
        out[a->name] = a->lo;
      } else {
        collect_sym_mins(a->a, out);
        collect_sym_mins(a->b, out);
      }
    }
}

}  // namespace

Lowerer::Lowerer(const ir::KernelSpec& spec, const std::vector<int>& args, const std::string& name,
                 kernel::Program& prog, const Options& opt)
    : body_(*spec.body), spec_(spec), args_(args), name_(name), prog_(prog), opt_(opt) {
  shapes_.resize(body_.nodes.size());
  for (size_t i = 0; i < body_.nodes.size(); ++i) {
    const Node& n = body_.nodes[i];
    for (const Dim& d : n.shape) {
      shapes_[i].push_back(dim_index(d, prog_));
      collect_sym_mins(d, sym_min_);
    }
    collect_sym_mins(n.start, sym_min_);
    collect_sym_mins(n.end, sym_min_);
  }
}

std::optional<Failure> Lowerer::lower(int result) {
  root_ = body_.outputs.at(0).second;
  const size_t buffers0 = prog_.buffers.size(), packs0 = prog_.packs.size();
  first_temp_buffer_ = static_cast<int>(buffers0);
  for (;;) {
    lower_once(result);
    if (failure_) return Failure{*failure_};
    if (retry_without_prologue_) {
      if (no_row_prologue_) return Failure{"internal: a GEMM row prologue retried twice"};
      retry_without_prologue_ = false;
      no_row_prologue_ = true;
    } else {
      if (!remat_) return std::nullopt;
      // Start over with node *remat_ computed into its own buffer (see kMaxInlineCopies).
      const uint32_t node = *remat_;
      remat_.reset();
      if (!shared_.insert(node).second) return Failure{"internal: node rematerialized twice"};
    }
    kernels.clear();
    materialized_.clear();
    prog_.buffers.resize(buffers0);
    prog_.packs.resize(packs0);
    counter_ = 0;
    ctx_ = Ctx{};
  }
}

// Each kernel kind: a recogniser (recognize.hpp: match the body, return a plan or why
// not) and an emitter (lowerer.hpp lists their files); a body no specialised form takes
// is generic loops.
void Lowerer::lower_once(int result) {
  const bool gemm = spec_.kind == ir::KernelKind::Gemm || spec_.kind == ir::KernelKind::LibraryGemm;
  if (gemm)
    if (auto m = recognize_gemm(body_, root_, opt_.half_results); m.plan && emit_gemm(*m.plan, result)) return;
  if (stopped()) return;
  if (spec_.kind == ir::KernelKind::Attention && try_attention(result)) return;
  if (stopped()) return;
  if (spec_.kind == ir::KernelKind::Gather) {
    auto m = recognize_gather(body_, root_);
    if (!m.plan) return void(unsupported(m.why, body_.nodes[root_].dtype));
    return emit_gather(*m.plan, result);
  }
  lower_generic(root_, result);
}

std::optional<Failure> lower_spec(const ir::KernelSpec& spec, const std::vector<int>& args, int result,
                                  const std::string& name, kernel::Program& prog, const Options& opt) {
  // Lowering only appends symbols and buffers (kernels are added on success), so undoing
  // a failed attempt is a truncation: copying the whole program per step made lowering a
  // 12-layer model quadratic in its kernel count.
  const size_t nbuffers = prog.buffers.size(), nsymbols = prog.symbols.size(), npacks = prog.packs.size();
  Lowerer l(spec, args, name, prog, opt);
  if (auto failed = l.lower(result)) {
    prog.buffers.resize(nbuffers);
    prog.symbols.resize(nsymbols);
    prog.packs.resize(npacks);
    return failed;
  }
  for (auto& k : l.kernels) prog.kernels.push_back(std::move(k));
  return std::nullopt;
}

}  // namespace luminal::kernel::lower