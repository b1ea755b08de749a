// Callable::save / luminal::load (see aot.hpp).
#include "runtime/aot.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <set>
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
// 2: whole-file checksum trailer, CPU features; 3: the plan's fast_math; 4: the tanh
// primitive (it renumbers every op after sin).
constexpr uint32_t kVersion = 4;
constexpr char kEndMagic[8] = {'L', 'M', 'A', 'O', 'T', 'E', 'N', 'D'};
constexpr size_t kTrailer = 16;  // checksum64 + kEndMagic
constexpr auto kLastPrimOp = static_cast<detail::PrimOp>(detail::kNumPrimOps - 1);
// Nesting of dim expressions read from a file (a crafted file must not exhaust the stack).
constexpr int kMaxDimDepth = 64;

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
  Dim dim(int depth = 0) {
    if (depth > kMaxDimDepth) throw RuntimeError("[load] " + what_ + " is corrupt (dims nested too deeply)");
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
          Dim x = dim(depth + 1), y = dim(depth + 1);
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
    std::vector<Dim> v(count(pod<uint32_t>()));
    for (auto& d : v) d = dim();
    return v;
  }
  std::vector<uint32_t> u32s() {
    std::vector<uint32_t> v(count(pod<uint32_t>(), 4));
    for (auto& x : v) x = pod<uint32_t>();
    return v;
  }
  // A count of items of at least `min_bytes` each: never more than the bytes left, so a
  // corrupt count is an error, not a huge allocation.
  size_t count(uint64_t n, size_t min_bytes = 1) {
    if (n > (s_.size() - pos_) / min_bytes) throw RuntimeError("[load] " + what_ + " is truncated or corrupt");
    return static_cast<size_t>(n);
  }
  template <class E>
  E enum_at_most(E last) {
    const auto v = pod<uint8_t>();
    if (v > static_cast<uint8_t>(last)) throw RuntimeError("[load] " + what_ + " is corrupt (bad enum value)");
    return static_cast<E>(v);
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
    n.op = r.enum_at_most(kLastPrimOp);
    n.inputs = r.u32s();
    for (uint32_t in : n.inputs)
      if (in >= i)
        throw RuntimeError("[load] corrupt graph: node " + std::to_string(i) + " reads a later node");
    n.shape = r.dims();
    n.dtype = r.enum_at_most(DType::boolean);
    n.value = r.pod<double>();
    n.axis = r.pod<int32_t>();
    n.perm.resize(r.count(r.pod<uint32_t>(), 4));
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
  w.pod<uint8_t>(p.fast_math ? 1 : 0);
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
    spec->kind = r.enum_at_most(ir::KernelKind::Collective);  // the last kind a plan holds
    spec->slots = r.pod<uint32_t>();
    spec->launch.resize(r.count(r.pod<uint32_t>(), 8));
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
  p.fast_math = r.pod<uint8_t>() != 0;
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
  if (!f && !f.eof()) throw RuntimeError("[load] cannot read '" + path + "'");
  return ss.str();
}

uint64_t file_checksum(const std::string& bytes, size_t n) { return cpu::checksum64(bytes.data(), n); }

std::set<std::string> words(const std::string& s) {
  std::set<std::string> out;
  std::istringstream in(s);
  for (std::string w; in >> w;) out.insert(w);
  return out;
}

// Instruction-set flags of /proc/cpuinfo that -march=native may use. Other flags
// (hypervisor, constant_tsc, ...) differ between machines that run the same code.
bool is_isa_flag(const std::string& f) {
  static const std::set<std::string> x86 = {
      "sse", "sse2", "pni", "ssse3", "sse4_1", "sse4_2", "sse4a", "popcnt", "avx", "avx2", "fma", "fma4", "f16c",
      "bmi1", "bmi2", "abm", "lzcnt", "movbe", "aes", "pclmulqdq", "vaes", "vpclmulqdq", "gfni", "adx",
      "rdrand", "rdseed", "sha_ni", "xsave", "xsaveopt", "xsavec", "cx16", "clflushopt", "clwb", "prfchw",
      "3dnowprefetch", "movdiri", "movdir64b", "serialize", "avx512f", "avx512cd", "avx512bw", "avx512dq",
      "avx512vl", "avx512ifma", "avx512vbmi", "avx512_vbmi2", "avx512_vnni", "avx512_bitalg",
      "avx512_vpopcntdq", "avx512_bf16", "avx512_fp16", "avx512_vp2intersect", "avx_vnni", "avx_vnni_int8",
      "avx_ifma", "avx_ne_convert", "amx_tile", "amx_bf16", "amx_int8", "amx_fp16"};
  return x86.count(f) > 0;
}

// The host's flags: x86 "flags" filtered to instruction sets, or every ARM "Features".
const std::set<std::string>& host_features() {
  static const std::set<std::string> f = [] {
    std::set<std::string> out;
    std::ifstream in("/proc/cpuinfo");
    for (std::string line; std::getline(in, line);) {
      const bool x86 = line.rfind("flags", 0) == 0, arm = line.rfind("Features", 0) == 0;
      if (!x86 && !arm) continue;
      const size_t colon = line.find(':');
      if (colon == std::string::npos) continue;
      for (const auto& w : words(line.substr(colon + 1)))
        if (arm || is_isa_flag(w)) out.insert(w);
      break;
    }
    return out;
  }();
  return f;
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

std::string reseal(std::string bytes) {
  if (bytes.size() < kTrailer) throw RuntimeError("[aot] too short to hold a trailer");
  const size_t n = bytes.size() - kTrailer;
  const uint64_t sum = file_checksum(bytes, n);
  std::memcpy(bytes.data() + n, &sum, 8);
  std::memcpy(bytes.data() + n + 8, kEndMagic, 8);
  return bytes;
}

void write_atomically(const std::string& path, const std::string& bytes) {
  // A unique name per call (threads of one process included), created O_EXCL and
  // without following a link, then renamed over `path`: readers never see a half-
  // written program and concurrent saves never write into one file.
  static std::atomic<uint64_t> counter{0};
  static const uint64_t salt = std::random_device{}();
  const std::string tmp = path + ".tmp-" + std::to_string(::getpid()) + "-" + std::to_string(counter++) + "-" +
                          std::to_string(salt % 1000000);
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
  if (fd < 0) throw RuntimeError("[save] cannot create '" + tmp + "': " + std::strerror(errno));
  const char* data = bytes.data();
  size_t left = bytes.size();
  int err = 0;
  while (left > 0) {
    const ssize_t n = ::write(fd, data, left);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      err = n < 0 ? errno : EIO;
      break;
    }
    data += n;
    left -= static_cast<size_t>(n);
  }
  if (!err && ::fsync(fd) != 0) err = errno;
  if (::close(fd) != 0 && !err) err = errno;
  if (!err && ::rename(tmp.c_str(), path.c_str()) != 0) err = errno;
  if (err) {
    ::unlink(tmp.c_str());
    throw RuntimeError("[save] cannot write '" + path + "': " + std::strerror(err));
  }
}

std::string required_cpu_features() {
  std::string s;
  for (const auto& f : host_features()) s += (s.empty() ? "" : " ") + f;
  return s;
}

std::string missing_cpu_features(const std::string& recorded) {
  std::string s;
  for (const auto& f : words(recorded))
    if (!host_features().count(f)) s += (s.empty() ? "" : " ") + f;
  return s;
}

Parsed parse(const std::string& bytes, const std::string& what) {
  Reader r(bytes, what);
  char magic[sizeof kMagic];
  r.raw(magic, sizeof magic);
  if (std::memcmp(magic, kMagic, sizeof magic) != 0)
    throw RuntimeError("[load] " + what + " is not a saved Luminal program");
  const uint32_t version = r.pod<uint32_t>();
  if (version != kVersion)
    throw RuntimeError("[load] " + what + " has format version " + std::to_string(version) +
                       ", this build reads " + std::to_string(kVersion));
  // Integrity first: nothing below trusts a byte the checksum has not covered.
  const size_t header = sizeof kMagic + 4;
  if (bytes.size() < header + kTrailer || std::memcmp(bytes.data() + bytes.size() - 8, kEndMagic, 8) != 0)
    throw RuntimeError("[load] " + what + " is truncated (no end marker)");
  const size_t body = bytes.size() - kTrailer;
  uint64_t stored = 0;
  std::memcpy(&stored, bytes.data() + body, 8);
  if (stored != file_checksum(bytes, body))
    throw RuntimeError("[load] " + what + " is corrupt (checksum mismatch): it was damaged after it was saved");
  const std::string inner = bytes.substr(header, body - header);
  Reader b(inner, what);
  Parsed p;
  p.state = std::make_shared<detail::CallableState>();
  p.state->target = Target::parse(b.str());
  const std::string arch = b.str();
  const std::string features = b.str();
#if defined(__x86_64__)
  const char* host_arch = "x86_64";
#elif defined(__aarch64__)
  const char* host_arch = "aarch64";
#else
  const char* host_arch = "unknown";
#endif
  if (arch != host_arch)
    throw RuntimeError("[load] " + what + " holds code for " + arch + "; this machine is " + host_arch);
  if (const std::string missing = missing_cpu_features(features); !missing.empty())
    throw RuntimeError("[load] " + what + " was compiled for a CPU with " + missing +
                       "; this CPU lacks them: compile and save the program on a machine like this one");
  p.state->graph = std::make_shared<const detail::GraphImpl>(read_graph(b));
  p.plan = std::make_shared<const compiler::KernelPlan>(read_plan(b));
  p.state->report = read_report(b);
  const uint32_t np = b.pod<uint32_t>();
  for (uint32_t i = 0; i < np; ++i) {
    std::string name = b.str();
    const auto dt = b.enum_at_most(DType::boolean);
    std::vector<int64_t> shape(b.count(b.pod<uint32_t>(), 8));
    for (auto& d : shape) d = b.pod<int64_t>();
    const std::string data = b.str();
    p.state->params[name] = std::make_shared<const HostTensor>(HostTensor::from_bytes(
        dt, shape, std::span<const std::byte>(reinterpret_cast<const std::byte*>(data.data()), data.size())));
  }
  p.source_hash = b.str();
  p.so = b.str();
  if (!b.done()) throw RuntimeError("[load] " + what + " is corrupt (trailing bytes)");
  return p;
}

std::string serialize_plan(const compiler::KernelPlan& p) {
  Writer w;
  write_plan(w, p);
  return std::move(w.bytes());
}

compiler::KernelPlan deserialize_plan(const std::string& bytes) {
  Reader r(bytes, "kernel plan");
  compiler::KernelPlan p = read_plan(r);
  if (!r.done()) throw RuntimeError("[load] kernel plan has trailing bytes");
  return p;
}

std::string serialize_report(const CompileReport& rep) {
  Writer w;
  write_report(w, rep);
  return std::move(w.bytes());
}

CompileReport deserialize_report(const std::string& bytes) {
  Reader r(bytes, "compile report");
  CompileReport rep = read_report(r);
  if (!r.done()) throw RuntimeError("[load] compile report has trailing bytes");
  return rep;
}

}  // namespace aot

void Callable::save(const std::string& path) const {
  if (!state_) throw RuntimeError("[save] this Callable is empty: make it with luminal::compile()");
  const detail::CallableState& st = *state_;
  const auto* exe = dynamic_cast<const cpu::CpuExecutable*>(st.exe.get());
  if (!exe)
    throw RuntimeError("[save] only programs compiled for the cpu target can be saved (this one is for " +
                       st.target.to_string() + ")");
  if (!st.param_blocks.empty())
    throw RuntimeError("[save] this program is one rank's share of a tensor-parallel program (compiled with a "
                       "communicator of " + std::to_string(st.report.ranks) +
                       " ranks): it stores weight shards and cannot be saved; save a program compiled without one");
  const std::string so = exe->library_bytes();
  aot::Writer w;
  w.str(st.target.to_string());
#if defined(__x86_64__)
  w.str("x86_64");
#elif defined(__aarch64__)
  w.str("aarch64");
#else
  w.str("unknown");
#endif
  w.str(aot::required_cpu_features());
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
  std::string file;
  file.reserve(sizeof aot::kMagic + 4 + w.bytes().size() + aot::kTrailer);
  file.append(aot::kMagic, sizeof aot::kMagic);
  const uint32_t version = aot::kVersion;
  file.append(reinterpret_cast<const char*>(&version), 4);
  file += w.bytes();
  file.append(aot::kTrailer, '\0');
  file = aot::reseal(std::move(file));
  aot::write_atomically(path, file);
}

Callable load(const std::string& path) {
  aot::Parsed p = aot::parse(aot::read_file(path), "'" + path + "'");
  cpu::CpuBuildOptions bo;
  bo.prebuilt_source_hash = p.source_hash;
  if (p.so.empty())
    bo.prebuilt_so_path = "/nonexistent";  // a program without kernels never opens it
  else
    bo.prebuilt_so_bytes = std::move(p.so);  // an anonymous memory file: nothing on disk
  p.state->exe = std::make_shared<const cpu::CpuExecutable>(p.plan, p.state->graph, bo);
  return Callable(std::move(p.state));
}

}  // namespace luminal
