// Callable::save / luminal::load (see aot.hpp).
#include "runtime/aot.hpp"

#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "backends/cpu/cpu_executable.hpp"
#include "graph/dim_expr.hpp"
#include "luminal/callable.hpp"
#include "luminal/error.hpp"
#include "runtime/executable.hpp"

namespace luminal {

namespace aot {

namespace {

constexpr char kMagic[12] = "LUMINAL-AOT";
constexpr uint32_t kVersion = 1;

class Writer {
 public:
  void raw(const void* p, size_t n) { s_.append(static_cast<const char*>(p), n); }
  template <class T>
  void pod(T v) {
    raw(&v, sizeof v);
  }
  void str(const std::string& s) {
    pod<uint64_t>(s.size());
    raw(s.data(), s.size());
  }
  void dim(const Dim& d) {
    const auto& e = *d.expr();
    pod<int64_t>(e.constant);
    pod<uint32_t>(static_cast<uint32_t>(e.terms.size()));
    for (const auto& t : e.terms) {
      pod<int64_t>(t.coeff);
      pod<uint32_t>(static_cast<uint32_t>(t.atoms.size()));
      for (const auto& a : t.atoms) {
        pod<uint8_t>(static_cast<uint8_t>(a->kind));
        if (a->kind == detail::AtomKind::Var) {
          str(a->name);
          pod<int64_t>(a->lo);
          pod<int64_t>(a->hi);
        } else {
          dim(a->a);
          dim(a->b);
        }
      }
    }
  }
  void dims(const std::vector<Dim>& v) {
    pod<uint32_t>(static_cast<uint32_t>(v.size()));
    for (const auto& d : v) dim(d);
  }
  void u32s(const std::vector<uint32_t>& v) {
    pod<uint32_t>(static_cast<uint32_t>(v.size()));
    for (uint32_t x : v) pod<uint32_t>(x);
  }
  std::string& bytes() { return s_; }

 private:
  std::string s_;
};

class Reader {
 public:
  Reader(const std::string& s, std::string what) : s_(s), what_(std::move(what)) {}
  void raw(void* p, size_t n) {
    if (n > s_.size() - pos_) throw RuntimeError("[load] " + what_ + " is truncated or corrupt");
    std::memcpy(p, s_.data() + pos_, n);
    pos_ += n;
  }
  template <class T>
  T pod() {
    T v{};
    raw(&v, sizeof v);
    return v;
  }
  std::string str() {
    const uint64_t n = pod<uint64_t>();
    if (n > s_.size() - pos_) throw RuntimeError("[load] " + what_ + " is truncated or corrupt");
    std::string out = s_.substr(pos_, static_cast<size_t>(n));
    pos_ += static_cast<size_t>(n);
    return out;
  }
  Dim dim() {
    Dim out(pod<int64_t>());
    const uint32_t nt = pod<uint32_t>();
    for (uint32_t t = 0; t < nt; ++t) {
      Dim term(pod<int64_t>());
      const uint32_t na = pod<uint32_t>();
      for (uint32_t a = 0; a < na; ++a) {
        const auto kind = static_cast<detail::AtomKind>(pod<uint8_t>());
        Dim atom;
        if (kind == detail::AtomKind::Var) {
          std::string name = str();
          const int64_t lo = pod<int64_t>(), hi = pod<int64_t>();
          atom = Dim::variable(name, lo, hi);
        } else {
          Dim x = dim(), y = dim();
          switch (kind) {
            case detail::AtomKind::Div:
              atom = x / y;
              break;
            case detail::AtomKind::Mod:
              atom = x % y;
              break;
            case detail::AtomKind::Min:
              atom = min(x, y);
              break;
            case detail::AtomKind::Max:
              atom = max(x, y);
              break;
            default:
              throw RuntimeError("[load] " + what_ + " is corrupt (dim atom)");
          }
        }
        term = term * atom;
      }
      out = out + term;
    }
    return out;
  }
  std::vector<Dim> dims() {
    std::vector<Dim> v(pod<uint32_t>());
    for (auto& d : v) d = dim();
    return v;
  }
  std::vector<uint32_t> u32s() {
    std::vector<uint32_t> v(pod<uint32_t>());
    for (auto& x : v) x = pod<uint32_t>();
    return v;
  }
  bool done() const { return pos_ == s_.size(); }

 private:
  const std::string& s_;
  size_t pos_ = 0;
  std::string what_;
};

void write_graph(Writer& w, const detail::GraphImpl& g) {
  w.pod<uint64_t>(g.nodes.size());
  for (const auto& n : g.nodes) {
    w.pod<uint8_t>(static_cast<uint8_t>(n.op));
    w.u32s(n.inputs);
    w.dims(n.shape);
    w.pod<uint8_t>(static_cast<uint8_t>(n.dtype));
    w.pod<double>(n.value);
    w.pod<int32_t>(n.axis);
    w.pod<uint32_t>(static_cast<uint32_t>(n.perm.size()));
    for (int p : n.perm) w.pod<int32_t>(p);
    w.dim(n.start);
    w.dim(n.end);
    w.pod<int64_t>(n.step);
    w.str(n.name);
    w.str(n.op_name);
  }
  w.pod<uint32_t>(static_cast<uint32_t>(g.dims.size()));
  for (const auto& d : g.dims) {
    w.str(d.name);
    w.pod<int64_t>(d.lo);
    w.pod<int64_t>(d.hi);
    w.dim(d.dim);
  }
  w.u32s(g.inputs);
  w.u32s(g.params);
  w.pod<uint32_t>(static_cast<uint32_t>(g.outputs.size()));
  for (const auto& [name, id] : g.outputs) {
    w.str(name);
    w.pod<uint32_t>(id);
  }
  w.pod<uint32_t>(static_cast<uint32_t>(g.guards.size()));
  for (const auto& gd : g.guards) {
    w.dim(gd.a);
    w.dim(gd.b);
    w.pod<uint8_t>(gd.less_equal ? 1 : 0);
    w.str(gd.message);
  }
}

detail::GraphImpl read_graph(Reader& r) {
  detail::GraphImpl g;
  const uint64_t nn = r.pod<uint64_t>();
  for (uint64_t i = 0; i < nn; ++i) {
    detail::Node n;
    n.op = static_cast<detail::PrimOp>(r.pod<uint8_t>());
    n.inputs = r.u32s();
    for (uint32_t in : n.inputs)
      if (in >= i)
        throw RuntimeError("[load] corrupt graph: node " + std::to_string(i) + " reads a later node");
    n.shape = r.dims();
    n.dtype = static_cast<DType>(r.pod<uint8_t>());
    n.value = r.pod<double>();
    n.axis = r.pod<int32_t>();
    n.perm.resize(r.pod<uint32_t>());
    for (int& p : n.perm) p = r.pod<int32_t>();
    n.start = r.dim();
    n.end = r.dim();
    n.step = r.pod<int64_t>();
    n.name = r.str();
    n.op_name = r.str();
    g.add(std::move(n));
  }
  const uint32_t nd = r.pod<uint32_t>();
  for (uint32_t i = 0; i < nd; ++i) {
    detail::DimDecl d;
    d.name = r.str();
    d.lo = r.pod<int64_t>();
    d.hi = r.pod<int64_t>();
    d.dim = r.dim();
    g.dims.push_back(std::move(d));
  }
  g.inputs = r.u32s();
  g.params = r.u32s();
  const uint32_t no = r.pod<uint32_t>();
  for (uint32_t i = 0; i < no; ++i) {
    std::string name = r.str();
    g.outputs.emplace_back(std::move(name), r.pod<uint32_t>());
  }
  const uint32_t ng = r.pod<uint32_t>();
  for (uint32_t i = 0; i < ng; ++i) {
    detail::Guard gd;
    gd.a = r.dim();
    gd.b = r.dim();
    gd.less_equal = r.pod<uint8_t>() != 0;
    gd.message = r.str();
    g.guards.push_back(std::move(gd));
  }
  auto check = [&](uint32_t id) {
    if (id >= g.nodes.size()) throw RuntimeError("[load] corrupt graph: node id out of range");
  };
  for (uint32_t id : g.inputs) check(id);
  for (uint32_t id : g.params) check(id);
  for (const auto& [name, id] : g.outputs) check(id);
  return g;
}

void write_plan(Writer& w, const compiler::KernelPlan& p) {
  w.pod<uint32_t>(static_cast<uint32_t>(p.leaf_name.size()));
  for (size_t v = 0; v < p.leaf_name.size(); ++v) {
    w.str(p.leaf_name[v]);
    w.pod<uint8_t>(p.leaf_is_param[v]);
  }
  w.pod<uint32_t>(static_cast<uint32_t>(p.steps.size()));
  for (const auto& st : p.steps) {
    w.pod<uint8_t>(static_cast<uint8_t>(st.spec->kind));
    w.pod<uint32_t>(st.spec->slots);
    w.pod<uint32_t>(static_cast<uint32_t>(st.spec->launch.size()));
    for (int64_t l : st.spec->launch) w.pod<int64_t>(l);
    write_graph(w, *st.spec->body);
    w.u32s(st.args);
    w.pod<uint32_t>(st.result);
    w.pod<double>(st.est_seconds);
    w.pod<uint32_t>(st.eclass);
  }
  w.pod<uint32_t>(static_cast<uint32_t>(p.outputs.size()));
  for (const auto& [name, v] : p.outputs) {
    w.str(name);
    w.pod<uint32_t>(v);
  }
}

compiler::KernelPlan read_plan(Reader& r) {
  compiler::KernelPlan p;
  const uint32_t nv = r.pod<uint32_t>();
  for (uint32_t v = 0; v < nv; ++v) {
    std::string name = r.str();
    p.add_value(std::move(name), r.pod<uint8_t>() != 0);
  }
  const uint32_t ns = r.pod<uint32_t>();
  for (uint32_t s = 0; s < ns; ++s) {
    auto spec = std::make_shared<ir::KernelSpec>();
    spec->kind = static_cast<ir::KernelKind>(r.pod<uint8_t>());
    spec->slots = r.pod<uint32_t>();
    spec->launch.resize(r.pod<uint32_t>());
    for (auto& l : spec->launch) l = r.pod<int64_t>();
    spec->body = std::make_shared<const detail::GraphImpl>(read_graph(r));
    spec->finalize();
    compiler::KernelPlan::Step st;
    st.spec = std::move(spec);
    st.args = r.u32s();
    st.result = r.pod<uint32_t>();
    st.est_seconds = r.pod<double>();
    st.eclass = r.pod<uint32_t>();
    for (uint32_t a : st.args)
      if (a >= nv) throw RuntimeError("[load] corrupt plan: value out of range");
    if (st.result >= nv) throw RuntimeError("[load] corrupt plan: value out of range");
    p.steps.push_back(std::move(st));
  }
  const uint32_t no = r.pod<uint32_t>();
  for (uint32_t i = 0; i < no; ++i) {
    std::string name = r.str();
    const uint32_t v = r.pod<uint32_t>();
    if (v >= nv) throw RuntimeError("[load] corrupt plan: output value out of range");
    p.outputs.emplace_back(std::move(name), v);
  }
  return p;
}

void write_report(Writer& w, const CompileReport& rep) {
  w.str(rep.target);
  for (int64_t x : {rep.kernels, rep.primitive_ops, rep.egraph_nodes, rep.egraph_classes, rep.iterations,
                    rep.generated_kernels, rep.interpreted_kernels, rep.arena_bytes, rep.intermediate_bytes})
    w.pod<int64_t>(x);
  w.str(rep.stop_reason);
  w.pod<double>(rep.compile_seconds);
  w.pod<double>(rep.estimated_seconds);
  w.pod<double>(rep.codegen_seconds);
}

CompileReport read_report(Reader& r) {
  CompileReport rep;
  rep.target = r.str();
  for (int64_t* x :
       {&rep.kernels, &rep.primitive_ops, &rep.egraph_nodes, &rep.egraph_classes, &rep.iterations,
        &rep.generated_kernels, &rep.interpreted_kernels, &rep.arena_bytes, &rep.intermediate_bytes})
    *x = r.pod<int64_t>();
  rep.stop_reason = r.str();
  rep.compile_seconds = r.pod<double>();
  rep.estimated_seconds = r.pod<double>();
  rep.codegen_seconds = r.pod<double>();
  return rep;
}

std::string read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw RuntimeError("[load] cannot open '" + path + "'");
  std::ostringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

}  // namespace

std::string serialize_graph(const detail::GraphImpl& g) {
  Writer w;
  write_graph(w, g);
  return std::move(w.bytes());
}

detail::GraphImpl deserialize_graph(const std::string& bytes) {
  Reader r(bytes, "graph");
  return read_graph(r);
}

}  // namespace aot

void Callable::save(const std::string& path) const {
  if (!state_) throw RuntimeError("[save] this Callable is empty: make it with luminal::compile()");
  const detail::CallableState& st = *state_;
  const auto* exe = dynamic_cast<const cpu::CpuExecutable*>(st.exe.get());
  if (!exe)
    throw RuntimeError("[save] only programs compiled for the cpu target can be saved (this one is for " +
                       st.target.to_string() + ")");
  std::string so;
  if (!exe->library_path().empty()) so = aot::read_file(exe->library_path());
  aot::Writer w;
  w.raw(aot::kMagic, sizeof aot::kMagic);
  w.pod<uint32_t>(aot::kVersion);
  w.str(st.target.to_string());
  aot::write_graph(w, *st.graph);
  aot::write_plan(w, *exe->plan());
  aot::write_report(w, st.report);
  {
    std::lock_guard<std::mutex> lock(st.mu);
    w.pod<uint32_t>(static_cast<uint32_t>(st.params.size()));
    for (const auto& [name, t] : st.params) {
      w.str(name);
      w.pod<uint8_t>(static_cast<uint8_t>(t->dtype()));
      w.pod<uint32_t>(static_cast<uint32_t>(t->shape().size()));
      for (int64_t d : t->shape()) w.pod<int64_t>(d);
      w.str(std::string(reinterpret_cast<const char*>(t->data()), t->nbytes()));
    }
  }
  w.str(exe->info().source_hash);
  w.str(so);
  // Atomic: a reader never sees a half-written program.
  const std::string tmp = path + ".tmp" + std::to_string(::getpid());
  {
    std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
    f.write(w.bytes().data(), static_cast<std::streamsize>(w.bytes().size()));
    if (!f) throw RuntimeError("[save] cannot write '" + tmp + "'");
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) {
    std::filesystem::remove(tmp, ec);
    throw RuntimeError("[save] cannot write '" + path + "'");
  }
}

Callable load(const std::string& path) {
  const std::string bytes = aot::read_file(path);
  aot::Reader r(bytes, "'" + path + "'");
  char magic[sizeof aot::kMagic];
  r.raw(magic, sizeof magic);
  if (std::memcmp(magic, aot::kMagic, sizeof magic) != 0)
    throw RuntimeError("[load] '" + path + "' is not a saved Luminal program");
  const uint32_t version = r.pod<uint32_t>();
  if (version != aot::kVersion)
    throw RuntimeError("[load] '" + path + "' has format version " + std::to_string(version) +
                       ", this build reads " + std::to_string(aot::kVersion));
  auto state = std::make_shared<detail::CallableState>();
  state->target = Target::parse(r.str());
  state->graph = std::make_shared<const detail::GraphImpl>(aot::read_graph(r));
  auto plan = std::make_shared<const compiler::KernelPlan>(aot::read_plan(r));
  state->report = aot::read_report(r);
  const uint32_t np = r.pod<uint32_t>();
  for (uint32_t i = 0; i < np; ++i) {
    std::string name = r.str();
    const auto dt = static_cast<DType>(r.pod<uint8_t>());
    std::vector<int64_t> shape(r.pod<uint32_t>());
    for (auto& d : shape) d = r.pod<int64_t>();
    const std::string data = r.str();
    state->params[name] = std::make_shared<const HostTensor>(HostTensor::from_bytes(
        dt, shape, std::span<const std::byte>(reinterpret_cast<const std::byte*>(data.data()), data.size())));
  }
  cpu::CpuBuildOptions bo;
  bo.prebuilt_source_hash = r.str();
  const std::string so = r.str();
  // The object is dlopen'ed from a private file, removed once loaded (the mapping stays).
  std::string so_path;
  if (!so.empty()) {
    so_path = (std::filesystem::temp_directory_path() /
               ("luminal-aot-" + std::to_string(::getpid()) + "-" + bo.prebuilt_source_hash + ".so"))
                  .string();
    std::ofstream f(so_path, std::ios::binary | std::ios::trunc);
    f.write(so.data(), static_cast<std::streamsize>(so.size()));
    if (!f) throw RuntimeError("[load] cannot write a temporary file '" + so_path + "'");
  }
  bo.prebuilt_so_path = so.empty() ? std::string("/nonexistent") : so_path;
  try {
    state->exe = std::make_shared<const cpu::CpuExecutable>(plan, state->graph, bo);
  } catch (...) {
    std::error_code ec;
    if (!so_path.empty()) std::filesystem::remove(so_path, ec);
    throw;
  }
  std::error_code ec;
  if (!so_path.empty()) std::filesystem::remove(so_path, ec);
  return Callable(std::move(state));
}

}  // namespace luminal
