// Plan cache (see plan_cache.hpp).
#include "runtime/plan_cache.hpp"

#include <dlfcn.h>
#include <link.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <random>
#include <sstream>
#include <unordered_map>

#include "backends/cpu/jit.hpp"
#include "rules/registry.hpp"
#include "runtime/aot.hpp"

extern char** environ;

namespace luminal::detail {

namespace {

namespace fs = std::filesystem;

constexpr char kMagic[12] = "LUMINALPLAN";
constexpr uint32_t kFormat = 3;  // 3: the plan's fast_math

struct State {
  std::mutex mu;
  std::unordered_map<std::string, std::shared_ptr<const CachedPlan>> memory;
  PlanCacheStats stats;
};
State& state() {
  static State s;
  return s;
}

/// This library's GNU build-id (a hash of its linked contents), else its path's size and
/// modification time: anything that changes when the library is rebuilt.
std::string build_identity() {
  static const std::string id = [] {
    std::string out;
    struct Search {
      const void* addr;
      std::string* out;
    } search{reinterpret_cast<const void*>(&build_identity), &out};
    dl_iterate_phdr(
        [](dl_phdr_info* info, size_t, void* data) -> int {
          auto* s = static_cast<Search*>(data);
          const auto a = reinterpret_cast<uintptr_t>(s->addr);
          bool mine = false;
          for (int i = 0; i < info->dlpi_phnum; ++i) {
            const auto& ph = info->dlpi_phdr[i];
            const uintptr_t lo = info->dlpi_addr + ph.p_vaddr;
            if (ph.p_type == PT_LOAD && a >= lo && a < lo + ph.p_memsz) mine = true;
          }
          if (!mine) return 0;
          for (int i = 0; i < info->dlpi_phnum; ++i) {
            const auto& ph = info->dlpi_phdr[i];
            if (ph.p_type != PT_NOTE) continue;
            const char* p = reinterpret_cast<const char*>(info->dlpi_addr + ph.p_vaddr);
            const char* end = p + ph.p_memsz;
            while (p + sizeof(ElfW(Nhdr)) <= end) {
              ElfW(Nhdr) nh;
              std::memcpy(&nh, p, sizeof nh);
              const char* name = p + sizeof nh;
              const char* desc = name + ((nh.n_namesz + 3) & ~3u);
              if (nh.n_type == NT_GNU_BUILD_ID && nh.n_namesz == 4 && std::memcmp(name, "GNU", 4) == 0 &&
                  desc + nh.n_descsz <= end) {
                s->out->assign("build-id:");
                s->out->append(desc, nh.n_descsz);
                return 1;
              }
              p = desc + ((nh.n_descsz + 3) & ~3u);
            }
          }
          return 1;
        },
        &search);
    if (out.empty()) {
      Dl_info info{};
      struct stat st {};
      if (dladdr(reinterpret_cast<const void*>(&build_identity), &info) && info.dli_fname &&
          ::stat(info.dli_fname, &st) == 0)
        out = std::string("file:") + info.dli_fname + ":" + std::to_string(st.st_size) + ":" +
              std::to_string(st.st_mtim.tv_sec) + "." + std::to_string(st.st_mtim.tv_nsec);
    }
    return out;
  }();
  return id;
}

/// LUMINAL_* variables that cannot change a plan (caches, dumps, traces, profiling).
bool env_irrelevant(const std::string& name) {
  for (const char* n : {"LUMINAL_CACHE_DIR", "LUMINAL_PLAN_CACHE", "LUMINAL_DUMP_C", "LUMINAL_DUMP_DOT",
                        "LUMINAL_TRACE_RULES", "LUMINAL_CPU_PROFILE", "LUMINAL_CC", "LUMINAL_DEBUG_FUSION",
                        "LUMINAL_DEBUG_EXTRACT", "LUMINAL_DEBUG_EXTRACT_CLASS"})
    if (name == n) return true;
  return false;
}

std::string registry_fingerprint() {
  std::string s;
  for (const auto& r : rules::Registry::global().all()) {
    s += r.name;
    s += '\x1f';
    s += r.set;
    s += r.fast_math ? "\x1f" "f\x1e" : "\x1f" "-\x1e";
  }
  return s;
}

fs::path plan_dir(const std::string& cache_dir) {
  if (!cache_dir.empty()) return fs::path(cache_dir) / "plans";
  const fs::path d = cpu::JitConfig::from_env().cache_dir;
  return d.empty() ? fs::path() : d / "plans";
}

bool disabled() {
  const char* v = std::getenv("LUMINAL_PLAN_CACHE");
  return v && std::string(v) == "0";
}

template <class T>
void put(std::string& s, T v) {
  s.append(reinterpret_cast<const char*>(&v), sizeof v);
}
void put_str(std::string& s, const std::string& v) {
  put<uint64_t>(s, v.size());
  s += v;
}

// Reads what put_str and the fixed-size fields wrote; every read is bounds-checked and a
// short buffer is a RuntimeError (the caller treats the entry as corrupt).
struct ByteReader {
  const std::string& bytes;
  size_t pos = 0;
  size_t take(size_t n) {
    if (n > bytes.size() - pos) throw RuntimeError("truncated");
    const size_t at = pos;
    pos += n;
    return at;
  }
  uint64_t u64() {
    uint64_t v;
    std::memcpy(&v, bytes.data() + take(8), 8);
    return v;
  }
  std::string str() {
    const uint64_t n = u64();
    if (n > bytes.size()) throw RuntimeError("truncated");
    return bytes.substr(take(static_cast<size_t>(n)), static_cast<size_t>(n));
  }
};

// The plan as stored: each distinct kernel spec once (a model's repeated layers share
// theirs: 12 layers, 12x fewer bodies to read back, and the loaded steps share spec
// objects again), written as a plan of one step per spec, then the steps referring to
// them by index.
std::string encode_plan(const compiler::KernelPlan& p) {
  std::map<const ir::KernelSpec*, uint32_t> index;
  compiler::KernelPlan specs;
  specs.add_value();
  std::string steps;
  put<uint64_t>(steps, p.steps.size());
  for (const auto& st : p.steps) {
    auto [it, fresh] = index.emplace(st.spec.get(), static_cast<uint32_t>(specs.steps.size()));
    if (fresh) {
      compiler::KernelPlan::Step one;
      one.spec = st.spec;
      specs.steps.push_back(std::move(one));
    }
    put<uint32_t>(steps, it->second);
    put<uint64_t>(steps, st.args.size());
    for (uint32_t a : st.args) put<uint32_t>(steps, a);
    put<uint32_t>(steps, st.result);
    put<double>(steps, st.est_seconds);
    put<uint32_t>(steps, st.eclass);
  }
  compiler::KernelPlan rest = p;  // values and outputs, no steps
  rest.steps.clear();
  std::string out;
  put_str(out, aot::serialize_plan(specs));
  put_str(out, aot::serialize_plan(rest));
  put_str(out, steps);
  return out;
}

compiler::KernelPlan decode_plan(const std::string& bytes) {
  ByteReader r{bytes};
  const compiler::KernelPlan specs = aot::deserialize_plan(r.str());
  compiler::KernelPlan p = aot::deserialize_plan(r.str());
  const std::string steps = r.str();
  if (r.pos != bytes.size()) throw RuntimeError("trailing bytes");
  // Steps, against the same bounds deserialize_plan checks.
  size_t sp = 0;
  auto step_pod = [&](auto& v) {
    if (sizeof v > steps.size() - sp) throw RuntimeError("truncated steps");
    std::memcpy(&v, steps.data() + sp, sizeof v);
    sp += sizeof v;
  };
  uint64_t n = 0;
  step_pod(n);
  const size_t nv = p.leaf_name.size();
  for (uint64_t s = 0; s < n; ++s) {
    compiler::KernelPlan::Step st;
    uint32_t spec = 0;
    step_pod(spec);
    if (spec >= specs.steps.size()) throw RuntimeError("spec index");
    st.spec = specs.steps[spec].spec;
    uint64_t na = 0;
    step_pod(na);
    if (na > steps.size()) throw RuntimeError("arg count");
    st.args.resize(static_cast<size_t>(na));
    for (auto& a : st.args) {
      step_pod(a);
      if (a >= nv) throw RuntimeError("value out of range");
    }
    step_pod(st.result);
    if (st.result >= nv) throw RuntimeError("value out of range");
    step_pod(st.est_seconds);
    step_pod(st.eclass);
    p.steps.push_back(std::move(st));
  }
  if (sp != steps.size()) throw RuntimeError("trailing step bytes");
  return p;
}

}  // namespace

std::string encode_cached_plan(const CachedPlan& entry) {
  std::string out;
  put_str(out, encode_plan(*entry.plan));
  put_str(out, aot::serialize_report(entry.report));
  return out;
}

CachedPlan decode_cached_plan(const std::string& bytes) {
  ByteReader r{bytes};
  const std::string plan = r.str();
  const std::string report = r.str();
  if (r.pos != bytes.size()) throw RuntimeError("[plan] trailing bytes after the report");
  CachedPlan e;
  e.plan = std::make_shared<const compiler::KernelPlan>(decode_plan(plan));
  e.report = aot::deserialize_report(report);
  return e;
}

std::string PlanCache::key(const GraphImpl& g, const Target& target, const CompileOptions& o) {
  if (disabled()) return {};
  std::string k;
  put_str(k, aot::serialize_graph(g));
  for (const auto& d : g.dims) put<int64_t>(k, d.multiple);  // not in the saved form
  put_str(k, target.to_string());
  put_str(k, cpu::cpu_signature());
  put<uint8_t>(k, o.fast_math ? 1 : 0);
  put<double>(k, o.time_budget_seconds);
  put<int64_t>(k, o.node_limit);
  put<int64_t>(k, o.iteration_limit);
  // Rules left out change the search (validate and the serving options do not).
  std::vector<std::string> skip = o.skip_rules;
  std::sort(skip.begin(), skip.end());
  put<int64_t>(k, static_cast<int64_t>(skip.size()));
  for (const auto& r : skip) put_str(k, r);
  put_str(k, registry_fingerprint());
  put_str(k, build_identity());
  put_str(k, LUMINAL_VERSION);
  std::vector<std::string> env;
  for (char** e = environ; e && *e; ++e) {
    const std::string kv = *e;
    if (kv.rfind("LUMINAL_", 0) != 0) continue;
    if (env_irrelevant(kv.substr(0, kv.find('=')))) continue;
    env.push_back(kv);
  }
  std::sort(env.begin(), env.end());
  for (const auto& kv : env) put_str(k, kv);
  return cpu::hash_hex(k);
}

std::shared_ptr<const CachedPlan> PlanCache::find(const std::string& key, const std::string& cache_dir) {
  if (key.empty()) return nullptr;
  State& s = state();
  {
    std::lock_guard<std::mutex> lock(s.mu);
    auto it = s.memory.find(key);
    if (it != s.memory.end()) {
      ++s.stats.memory_hits;
      return it->second;
    }
  }
  const fs::path dir = plan_dir(cache_dir);
  if (dir.empty()) {
    std::lock_guard<std::mutex> lock(s.mu);
    ++s.stats.misses;
    return nullptr;
  }
  const fs::path file = dir / (key + ".plan");
  std::ifstream f(file, std::ios::binary);
  if (!f) {
    std::lock_guard<std::mutex> lock(s.mu);
    ++s.stats.misses;
    return nullptr;
  }
  std::ostringstream ss;
  ss << f.rdbuf();
  const std::string bytes = ss.str();
  // magic | format | key | plan | report | checksum of everything before it
  try {
    ByteReader r{bytes};
    if (bytes.size() < sizeof kMagic + 12 || std::memcmp(bytes.data(), kMagic, sizeof kMagic) != 0)
      throw RuntimeError("bad magic");
    r.take(sizeof kMagic);
    uint32_t format;
    std::memcpy(&format, bytes.data() + r.take(4), 4);
    if (format != kFormat) throw RuntimeError("format");
    if (r.str() != key) throw RuntimeError("key");
    const std::string plan = r.str();
    const std::string report = r.str();
    const size_t body = r.pos;
    const uint64_t sum = r.u64();
    if (r.pos != bytes.size() || sum != cpu::checksum64(bytes.data(), body)) throw RuntimeError("checksum");
    auto entry = std::make_shared<CachedPlan>();
    entry->plan = std::make_shared<const compiler::KernelPlan>(decode_plan(plan));
    entry->report = aot::deserialize_report(report);
    std::lock_guard<std::mutex> lock(s.mu);
    ++s.stats.disk_hits;
    s.memory[key] = entry;
    return entry;
  } catch (const std::exception&) {
    std::error_code ec;
    fs::remove(file, ec);
    std::lock_guard<std::mutex> lock(s.mu);
    ++s.stats.corrupt_entries;
    ++s.stats.misses;
    return nullptr;
  }
}

void PlanCache::store(const std::string& key, const std::string& cache_dir, const CachedPlan& entry) {
  if (key.empty()) return;
  State& s = state();
  {
    std::lock_guard<std::mutex> lock(s.mu);
    s.memory[key] = std::make_shared<const CachedPlan>(entry);
  }
  const fs::path dir = plan_dir(cache_dir);
  if (dir.empty()) return;
  std::string bytes(kMagic, sizeof kMagic);
  put<uint32_t>(bytes, kFormat);
  put_str(bytes, key);
  put_str(bytes, encode_plan(*entry.plan));
  put_str(bytes, aot::serialize_report(entry.report));
  put<uint64_t>(bytes, cpu::checksum64(bytes.data(), bytes.size()));
  // Best effort: a cache that cannot be written only costs the next start a search.
  std::error_code ec;
  fs::create_directories(dir, ec);
  static std::atomic<uint64_t> counter{0};
  const fs::path tmp = dir / (key + "." + std::to_string(::getpid()) + "-" + std::to_string(counter++) + "-" +
                              std::to_string(std::random_device{}()) + ".tmp");
  {
    std::ofstream f(tmp, std::ios::binary);
    if (!f) return;
    f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    if (!f) {
      f.close();
      fs::remove(tmp, ec);
      return;
    }
  }
  fs::rename(tmp, dir / (key + ".plan"), ec);
  if (ec) fs::remove(tmp, ec);
}

PlanCacheStats PlanCache::stats() {
  std::lock_guard<std::mutex> lock(state().mu);
  return state().stats;
}

void PlanCache::clear_memory() {
  std::lock_guard<std::mutex> lock(state().mu);
  state().memory.clear();
}

}  // namespace luminal::detail
