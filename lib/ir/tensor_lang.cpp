// Attributes, kernel specs and the shape/dtype/constant analysis of the tensor language.
#include "ir/tensor_lang.hpp"

#include "graph/dim_expr.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <string>
#include <cstring>

#include "backends/reference/kernels.hpp"
#include "luminal/error.hpp"

namespace luminal::ir {

namespace {

uint64_t mix(uint64_t h, uint64_t w) { return egraph::hash_step(h, w); }
uint64_t hash_dim(const Dim& d) { return static_cast<uint64_t>(d.hash()); }
uint64_t hash_shape(uint64_t h, const std::vector<Dim>& s) {
  h = mix(h, s.size());
  for (const Dim& d : s) h = mix(h, hash_dim(d));
  return h;
}
bool same_shape(const std::vector<Dim>& a, const std::vector<Dim>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (!a[i].same_as(b[i])) return false;
  return true;
}
uint64_t bits(double v) { return std::bit_cast<uint64_t>(v); }

}  // namespace

uint64_t hash_body_node(const detail::Node& n) { return hash_body_node(n, n.inputs); }
uint64_t hash_body_node(const detail::Node& n, std::span<const uint32_t> inputs) {
  uint64_t h = mix(static_cast<uint64_t>(n.op) + 1, static_cast<uint64_t>(n.dtype));
  for (uint32_t i : inputs) h = mix(h, i);
  h = mix(h, bits(n.value));
  h = mix(h, static_cast<uint64_t>(n.axis));
  for (int p : n.perm) h = mix(h, static_cast<uint64_t>(p));
  h = hash_shape(h, n.shape);
  h = mix(mix(h, hash_dim(n.start)), hash_dim(n.end));
  h = mix(h, static_cast<uint64_t>(n.step));
  h = mix(h, std::hash<std::string>{}(n.name));
  return h;
}
bool same_body_node(const detail::Node& a, const detail::Node& b) { return same_body_node(a, b, b.inputs); }
bool same_body_node(const detail::Node& a, const detail::Node& b, std::span<const uint32_t> b_inputs) {
  return a.op == b.op && std::equal(a.inputs.begin(), a.inputs.end(), b_inputs.begin(), b_inputs.end()) &&
         a.dtype == b.dtype && bits(a.value) == bits(b.value) && a.axis == b.axis && a.perm == b.perm &&
         same_shape(a.shape, b.shape) && a.start.same_as(b.start) && a.end.same_as(b.end) &&
         a.step == b.step && a.name == b.name;
}

namespace {

// Reads element 0 of a one-element view as a double (f32, i32, bool only).
std::optional<double> scalar_of(const detail::reference::View& v) {
  const std::byte* p = v.base + v.offset * static_cast<int64_t>(dtype_size(v.dtype));
  switch (v.dtype) {
    case DType::f32: {
      float f;
      std::memcpy(&f, p, 4);
      return f;
    }
    case DType::i32: {
      int32_t i;
      std::memcpy(&i, p, 4);
      return i;
    }
    case DType::boolean:
      return static_cast<double>(static_cast<uint8_t>(*p) != 0);
    default:
      return std::nullopt;
  }
}
std::optional<double> fold_constant(double value, DType dt) {
  if (dt != DType::f32 && dt != DType::i32 && dt != DType::boolean) return std::nullopt;
  return scalar_of(detail::reference::constant(value, dt));
}

// Folds an elementwise op over uniform operands with the interpreter's own kernels, so
// the analysis can never disagree with the semantics.
std::optional<double> fold(Op op, const Attr& at, const std::vector<const ClassData*>& k) {
  namespace rf = detail::reference;
  std::vector<rf::View> v;
  for (const ClassData* d : k) {
    if (!d->constant) return std::nullopt;
    if (d->dtype != DType::f32 && d->dtype != DType::i32 && d->dtype != DType::boolean) return std::nullopt;
    v.push_back(rf::constant(*d->constant, d->dtype));
  }
  try {
    if (is_unary(op)) return scalar_of(rf::unary(to_prim(op), v[0]));
    if (is_binary(op)) return scalar_of(rf::binary(to_prim(op), v[0], v[1]));
    if (op == Op::Where) return scalar_of(rf::where(v[0], v[1], v[2]));
    if (op == Op::Cast) return scalar_of(rf::cast(v[0], at.dtype));
  } catch (const Error&) {
    return std::nullopt;  // an op that rejects these operands: no fact
  }
  return std::nullopt;
}

[[noreturn]] void malformed(Op op, const std::string& why) {
  throw InternalError(std::string("[ir] malformed ") + op_name(op) + " node: " + why);
}

}  // namespace

const char* op_name(Op o) {
  if (is_prim(o)) return prim_name(to_prim(o)).data();
  return o == Op::MatMul ? "matmul" : "kernel";
}

const char* kind_name(KernelKind k) {
  switch (k) {
    case KernelKind::Elementwise:
      return "elementwise";
    case KernelKind::Reduction:
      return "reduction";
    case KernelKind::Gemm:
      return "gemm";
    case KernelKind::LibraryGemm:
      return "library_gemm";
    case KernelKind::Gather:
      return "gather";
    case KernelKind::Attention:
      return "attention";
    case KernelKind::AttentionTwoPass:
      return "attention_two_pass";
    case KernelKind::Collective:
      return "collective";
  }
  return "?";
}

std::string slot_name(uint32_t i) {
  std::string s = "%";  // appended, not "%" + to_string(i): GCC 12 warns falsely (-Wrestrict)
  return s.append(std::to_string(i));
}

void KernelSpec::finalize() {
  uint64_t h = mix(0x6b65726eull, static_cast<uint64_t>(kind));
  h = mix(h, slots);
  for (int64_t l : launch) h = mix(h, static_cast<uint64_t>(l));
  if (body)
    for (const detail::Node& n : body->nodes) h = mix(h, hash_body_node(n));
  hash = h;
}

bool KernelSpec::operator==(const KernelSpec& o) const {
  if (hash != o.hash || kind != o.kind || slots != o.slots || launch != o.launch) return false;
  if (body == o.body) return true;
  if (!body || !o.body || body->nodes.size() != o.body->nodes.size()) return false;
  for (size_t i = 0; i < body->nodes.size(); ++i)
    if (!same_body_node(body->nodes[i], o.body->nodes[i])) return false;
  return true;
}

bool Attr::operator==(const Attr& o) const {
  if (dtype != o.dtype || axis != o.axis || step != o.step || bits(value) != bits(o.value) ||
      perm != o.perm || name != o.name || !same_shape(shape, o.shape) || !a.same_as(o.a) || !b.same_as(o.b))
    return false;
  if (kernel == o.kernel) return true;
  return kernel && o.kernel && *kernel == *o.kernel;
}

uint64_t Attr::hash() const {
  uint64_t h = mix(static_cast<uint64_t>(dtype) + 7, static_cast<uint64_t>(axis));
  h = mix(mix(h, static_cast<uint64_t>(step)), bits(value));
  for (int p : perm) h = mix(h, static_cast<uint64_t>(p));
  h = hash_shape(h, shape);
  h = mix(mix(h, hash_dim(a)), hash_dim(b));
  h = mix(h, std::hash<std::string>{}(name));
  if (kernel) h = mix(h, kernel->hash);
  return h;
}

AttrStore::AttrStore() {
  attrs_.emplace_back();
  index_.emplace(attrs_[0].hash(), 0);
}

uint32_t AttrStore::intern(const Attr& a) {
  const uint64_t h = a.hash();
  auto [b, e] = index_.equal_range(h);
  for (auto it = b; it != e; ++it)
    if (attrs_[it->second] == a) return it->second;
  attrs_.push_back(a);
  const auto id = static_cast<uint32_t>(attrs_.size() - 1);
  index_.emplace(h, id);
  return id;
}

namespace {
std::string describe(const ClassData& d) {
  std::string s = "(";
  for (size_t i = 0; i < d.shape.size(); ++i) s += (i ? ", " : "") + d.shape[i].to_string();
  s += ") ";
  s += dtype_name(d.dtype);
  if (d.constant) s += " = " + std::to_string(*d.constant) + (std::signbit(*d.constant) ? " (sign bit set)" : "");
  return s;
}
}  // namespace

egraph::DidMerge TensorAnalysis::merge(Data& a, Data b) const {
  egraph::DidMerge dm;
  if (!a.valid) {
    dm.a = b.valid;
    a = std::move(b);
    return dm;
  }
  if (!b.valid) {
    dm.b = true;
    return dm;
  }
  // Only a wrong rule merges classes of different shapes or dtypes. (Known constants may
  // differ: a fast-math rule may merge x * 0 with 0 where x is a negative constant.)
  if (a.dtype != b.dtype || !same_shape(a.shape, b.shape)) {
    const std::string why = "[ir] a rule merged classes that differ: " + describe(a) + " and " + describe(b);
    if (strict_merges_) throw InternalError(why);
    if (wrong_merges_++ == 0) first_wrong_merge_ = why;
  }
  if (a.replicated != b.replicated) {
    (a.replicated ? dm.b : dm.a) = true;
    a.replicated = true;
  }
  if (!a.constant && b.constant) {
    a.constant = b.constant;
    dm.a = true;
  } else if (a.constant && !b.constant) {
    dm.b = true;
  }
  // The attribute-carrying nodes are joined too, but a change there is not reported:
  // no parent's data depends on them (make reads shape, dtype and constant), and
  // reporting it re-analysed every ancestor after every merge -- their lists hold child
  // ids that merges make stale, so each re-analysis "changed" them again (a cyclic
  // e-graph spent minutes in rebuild).
  if (a.attributed != b.attributed) {
    std::vector<AttrNode> u;
    u.reserve(a.attributed.size() + b.attributed.size());
    std::set_union(a.attributed.begin(), a.attributed.end(), b.attributed.begin(), b.attributed.end(),
                   std::back_inserter(u));
    a.attributed = std::move(u);
  }
  return dm;
}

bool mentions_rank(const Dim& d) {
  for (const detail::Term& t : d.expr()->terms)
    for (const detail::AtomPtr& a : t.atoms)
      if (a->kind == detail::AtomKind::Var ? a->name == detail::kRankDim : mentions_rank(a->a) || mentions_rank(a->b))
        return true;
  return false;
}

namespace {
// Whether a node's value is equal on every rank, from its children's (ClassData::replicated).
bool replicated_node(Op op, const Attr& at, const std::vector<const ClassData*>& k) {
  if (op == Op::AllGather || op == Op::AllReduce) return true;
  if (op == Op::ReduceScatter) return false;
  if ((op == Op::Slice || op == Op::Pad) && (mentions_rank(at.a) || mentions_rank(at.b))) return false;
  if (op == Op::Kernel) {
    if (at.kernel->kind == KernelKind::Collective) return at.kernel->body->nodes.back().op != PrimOp::ReduceScatter;
    for (const detail::Node& n : at.kernel->body->nodes)
      if ((n.op == PrimOp::Slice || n.op == PrimOp::Pad) && (mentions_rank(n.start) || mentions_rank(n.end)))
        return false;
  }
  for (const ClassData* x : k)
    if (!x->replicated) return false;
  return true;
}
}  // namespace

ClassData TensorAnalysis::infer(Op op, const Attr& at, const std::vector<const Data*>& k) {
  auto need = [&](size_t n) {
    if (k.size() != n)
      malformed(op, "expects " + std::to_string(n) + " children, has " + std::to_string(k.size()));
  };
  auto axis_ok = [&](const Data& x, int axis) {
    if (axis < 0 || static_cast<size_t>(axis) >= x.shape.size())
      malformed(op,
                "axis " + std::to_string(axis) + " out of range for rank " + std::to_string(x.shape.size()));
  };
  Data d;
  d.valid = true;
  switch (op) {
    case Op::Input:
    case Op::Param:
      d.shape = at.shape;
      d.dtype = at.dtype;
      break;
    case Op::Constant:
      d.dtype = at.dtype;
      d.constant = fold_constant(at.value, at.dtype);
      break;
    case Op::Iota:
      d.shape = {at.shape.at(0)};
      d.dtype = DType::i32;
      break;
      LUMINAL_PRIM_UNARY_OPS(LUMINAL_CASE_IROP)
      need(1);
      d.shape = k[0]->shape;
      d.dtype = k[0]->dtype;
      d.constant = fold(op, at, k);
      break;
      LUMINAL_PRIM_BINARY_OPS(LUMINAL_CASE_IROP)
      need(2);
      d.shape = k[0]->shape;
      d.dtype = detail::result_dtype(to_prim(op), k[0]->dtype);
      d.constant = fold(op, at, k);
      break;
    case Op::Where:
      need(3);
      d.shape = k[1]->shape;
      d.dtype = k[1]->dtype;
      d.constant = fold(op, at, k);
      if (!d.constant && k[1]->constant && k[2]->constant && bits(*k[1]->constant) == bits(*k[2]->constant))
        d.constant = k[1]->constant;
      break;
    case Op::Cast:
      need(1);
      d.shape = k[0]->shape;
      d.dtype = at.dtype;
      d.constant = fold(op, at, k);
      break;
    case Op::SumReduce:
    case Op::MaxReduce:
      need(1);
      axis_ok(*k[0], at.axis);
      d.shape = k[0]->shape;
      d.shape.erase(d.shape.begin() + at.axis);
      d.dtype = k[0]->dtype;
      break;
    case Op::Gather: {
      need(2);
      if (k[0]->shape.empty()) malformed(op, "table of rank 0");
      d.shape = k[1]->shape;
      d.shape.insert(d.shape.end(), k[0]->shape.begin() + 1, k[0]->shape.end());
      d.dtype = k[0]->dtype;
      break;
    }
    case Op::AllReduce:
    case Op::AllGather:
    case Op::ReduceScatter: {
      // SPMD (graph/primitives.hpp): only all_gather keeps a uniform constant (a sum over
      // ranks does not).
      need(1);
      if (at.step < 1) malformed(op, "collective over fewer than one rank");
      d.shape = k[0]->shape;
      d.dtype = k[0]->dtype;
      if (op == Op::AllReduce) break;
      axis_ok(*k[0], at.axis);
      Dim& x = d.shape[static_cast<size_t>(at.axis)];
      if (op == Op::AllGather) {
        x = x * Dim(at.step);
        d.constant = k[0]->constant;
      } else {
        if (x.known_divisor() % at.step != 0) malformed(op, "axis not a multiple of the ranks");
        x = x / Dim(at.step);
      }
      break;
    }
    case Op::Reshape:
    case Op::Expand:
      need(1);
      d.shape = at.shape;
      d.dtype = k[0]->dtype;
      d.constant = k[0]->constant;
      break;
    case Op::Permute:
      need(1);
      if (at.perm.size() != k[0]->shape.size()) malformed(op, "perm of the wrong rank");
      for (int p : at.perm) {
        axis_ok(*k[0], p);
        d.shape.push_back(k[0]->shape[static_cast<size_t>(p)]);
      }
      d.dtype = k[0]->dtype;
      d.constant = k[0]->constant;
      break;
    case Op::Slice:
      need(1);
      axis_ok(*k[0], at.axis);
      d.shape = k[0]->shape;
      d.shape[static_cast<size_t>(at.axis)] = (at.b - at.a + Dim(at.step - 1)) / Dim(at.step);
      d.dtype = k[0]->dtype;
      d.constant = k[0]->constant;
      break;
    case Op::Pad:
      need(1);
      axis_ok(*k[0], at.axis);
      d.shape = k[0]->shape;
      d.shape[static_cast<size_t>(at.axis)] = k[0]->shape[static_cast<size_t>(at.axis)] + at.a + at.b;
      d.dtype = k[0]->dtype;
      if (k[0]->constant) {
        const auto fill = fold_constant(at.value, d.dtype);
        if (fill && bits(*fill) == bits(*k[0]->constant)) d.constant = k[0]->constant;  // -0 is not +0
      }
      break;
    case Op::MatMul: {
      need(2);
      const auto& a = k[0]->shape;
      const auto& b = k[1]->shape;
      if (a.size() < 2 || a.size() != b.size()) malformed(op, "operands of rank < 2 or of different ranks");
      d.shape = a;
      d.shape.back() = b.back();
      d.dtype = k[0]->dtype;
      break;
    }
    case Op::Kernel: {
      if (!at.kernel || !at.kernel->body || at.kernel->body->outputs.size() != 1) malformed(op, "no body");
      if (k.size() != at.kernel->slots) malformed(op, "slot count differs from its children");
      const detail::Node& out = at.kernel->body->nodes[at.kernel->body->outputs[0].second];
      d.shape = out.shape;
      d.dtype = out.dtype;
      break;
    }
  }
  d.replicated = replicated_node(op, at, k);
  return d;
}

}  // namespace luminal::ir
