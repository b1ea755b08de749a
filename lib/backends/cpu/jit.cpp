#include "backends/cpu/jit.hpp"

#include <dlfcn.h>
#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <random>
#include <sstream>

#include "luminal/error.hpp"

extern char** environ;

namespace luminal::cpu {
namespace fs = std::filesystem;

namespace {

// ------------------------------------------------------------------ hashing
uint64_t fnv1a(const void* data, size_t n, uint64_t h = 0xcbf29ce484222325ULL) {
  const auto* p = static_cast<const unsigned char*>(data);
  for (size_t i = 0; i < n; ++i) {
    h ^= p[i];
    h *= 0x100000001b3ULL;
  }
  return h;
}

uint64_t splitmix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

// A second, independent 64-bit hash: 8-byte words through a splitmix chain.
uint64_t wordmix(const std::string& s) {
  uint64_t h = 0x243f6a8885a308d3ULL ^ s.size();
  size_t i = 0;
  for (; i + 8 <= s.size(); i += 8) {
    uint64_t w;
    std::memcpy(&w, s.data() + i, 8);
    h = splitmix(h ^ w);
  }
  uint64_t tail = 0;
  std::memcpy(&tail, s.data() + i, s.size() - i);
  return splitmix(h ^ tail ^ (uint64_t{s.size() - i} << 56));
}

// ------------------------------------------------------------------ cache entry trailer
constexpr std::array<char, 8> kMagic = {'L', 'M', 'J', 'I', 'T', 'v', '1', '\n'};
struct Trailer {
  std::array<char, 8> magic;
  uint64_t payload_size;
  uint64_t payload_checksum;
  uint64_t key_checksum;
};
static_assert(sizeof(Trailer) == 32);

std::string read_file(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// True when `path` holds a complete entry for `key`: the trailer matches the size and
// checksum of the bytes before it.
bool entry_is_valid(const fs::path& path, const std::string& key) {
  std::string bytes = read_file(path);
  if (bytes.size() < sizeof(Trailer)) return false;
  Trailer t;
  std::memcpy(&t, bytes.data() + bytes.size() - sizeof(Trailer), sizeof(Trailer));
  size_t payload = bytes.size() - sizeof(Trailer);
  return t.magic == kMagic && t.payload_size == payload &&
         t.key_checksum == checksum64(key.data(), key.size()) &&
         t.payload_checksum == checksum64(bytes.data(), payload);
}

void append_trailer(const fs::path& path, const std::string& key) {
  std::string bytes = read_file(path);
  Trailer t{kMagic, bytes.size(), checksum64(bytes.data(), bytes.size()), checksum64(key.data(), key.size())};
  std::ofstream out(path, std::ios::binary | std::ios::app);
  out.write(reinterpret_cast<const char*>(&t), sizeof t);
  out.flush();
  if (!out) throw CompileError("[jit] cannot write cache entry " + path.string());
}

// ------------------------------------------------------------------ processes
std::vector<std::string> split_words(const std::string& s) {
  std::vector<std::string> out;
  std::istringstream in(s);
  for (std::string w; in >> w;) out.push_back(w);
  return out;
}

std::string join(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& w : v) {
    if (!s.empty()) s += ' ';
    s += w;
  }
  return s;
}

std::string unique_suffix() {
  static std::atomic<uint64_t> counter{0};
  static const uint64_t salt = std::random_device{}();
  return std::to_string(::getpid()) + "-" + std::to_string(counter++) + "-" + std::to_string(salt % 100000);
}

// Runs argv with stdout and stderr sent to `log`; returns the exit status (or -1 when the
// program could not be started, with the reason in `log`).
int run_process(const std::vector<std::string>& argv, const fs::path& log) {
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 1, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_adddup2(&fa, 1, 2);
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = 0;
  int rc = posix_spawnp(&pid, args[0], &fa, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  if (rc != 0) {
    std::ofstream(log) << "cannot start '" << argv[0] << "': " << std::strerror(rc) << "\n";
    return -1;
  }
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) return -1;
  }
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  return 128 + (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
}

// A private folder for one compiler run (source, log, and the .so when the disk cache is
// off), removed with everything in it when the run is over: a process never leaves
// temp folders behind, even the never-destroyed global Jit.
struct ScratchDir {
  fs::path path;
  ScratchDir() {
    std::string tmpl = (fs::temp_directory_path() / "luminal-jit-XXXXXX").string();
    if (::mkdtemp(tmpl.data()) == nullptr)
      throw CompileError("[jit] cannot create a scratch folder under " + fs::temp_directory_path().string() +
                         ": " + std::strerror(errno));
    path = tmpl;
  }
  ~ScratchDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;
};

bool on_path(const std::string& name) {
  const char* path = std::getenv("PATH");
  if (!path) return false;
  std::istringstream in(path);
  for (std::string dir; std::getline(in, dir, ':');) {
    if (dir.empty()) continue;
    if (::access((fs::path(dir) / name).c_str(), X_OK) == 0) return true;
  }
  return false;
}

}  // namespace

uint64_t checksum64(const void* data, size_t n) { return splitmix(fnv1a(data, n)); }

std::string hash_hex(const std::string& data) {
  char buf[33];
  std::snprintf(buf, sizeof buf, "%016llx%016llx",
                static_cast<unsigned long long>(fnv1a(data.data(), data.size())),
                static_cast<unsigned long long>(wordmix(data)));
  return buf;
}

const std::string& cpu_signature() {
  static const std::string sig = [] {
    std::ifstream in("/proc/cpuinfo");
    std::string model, flags;
    for (std::string line; std::getline(in, line);) {
      if (model.empty() && line.rfind("model name", 0) == 0) model = line;
      if (flags.empty() && line.rfind("flags", 0) == 0) flags = line;
      if (!model.empty() && !flags.empty()) break;
    }
    return model + "|" + flags;
  }();
  return sig;
}

// ------------------------------------------------------------------ JitLibrary
JitLibrary::~JitLibrary() {
  if (handle_) ::dlclose(handle_);
}

void* JitLibrary::symbol(const std::string& name) const {
  ::dlerror();
  void* p = ::dlsym(handle_, name.c_str());
  if (!p) throw CompileError("[jit] symbol '" + name + "' not found in " + path_);
  return p;
}

// ------------------------------------------------------------------ config
std::vector<std::string> JitConfig::default_flags() {
  // -O3 -march=native: vectorize for the host ISA (the cache key carries the CPU
  //   features, so an entry never runs on a CPU that lacks them).
  // -mprefer-vector-width=512: GCC tunes Zen/Skylake for 256-bit vectors by default;
  //   our kernels are long, regular loops where 512-bit vectors win.
  // -fopenmp: parallel loops and `omp simd` (the library itself links the same libgomp).
  // -ffp-contract=off: a*b+c is never silently fused, so generated code rounds like the
  //   reference interpreter; kernels that want FMA ask for it explicitly (the prelude,
  //   GEMM intrinsics).
  // -fno-math-errno -fno-trapping-math: sqrtf becomes one instruction and selects
  //   if-convert; results are unchanged (no -ffast-math: NaN/inf and the order of
  //   floating-point operations are kept).
  std::vector<std::string> f = {
      "-std=gnu11",         "-O3",   "-march=native", "-fopenmp", "-ffp-contract=off", "-fno-math-errno",
      "-fno-trapping-math", "-fPIC", "-shared",       "-w"};
  if (cpu_signature().find(" avx512f") != std::string::npos)
    f.insert(f.begin() + 3, "-mprefer-vector-width=512");
  return f;
}

JitConfig JitConfig::from_env() {
  JitConfig c;
  if (const char* cc = std::getenv("LUMINAL_CC"); cc && *cc) {
    c.compiler = cc;
  } else {
    for (const char* name : {"cc", "gcc", "clang"}) {
      if (on_path(name)) {
        c.compiler = name;
        break;
      }
    }
  }
  c.flags = default_flags();
  if (const char* dir = std::getenv("LUMINAL_CACHE_DIR")) {
    c.cache_dir = dir;  // set but empty: disk cache disabled
  } else if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg && *xdg) {
    c.cache_dir = fs::path(xdg) / "luminal";
  } else if (const char* home = std::getenv("HOME"); home && *home) {
    c.cache_dir = fs::path(home) / ".cache" / "luminal";
  }
  return c;
}

// ------------------------------------------------------------------ Jit
struct Jit::Entry {
  std::mutex mu;  // held while this key is being built, so it is built once
  std::shared_ptr<const JitLibrary> lib;
};

Jit::Jit(JitConfig config) : config_(std::move(config)) {
  if (!config_.cache_dir.empty()) {
    std::error_code ec;
    fs::create_directories(config_.cache_dir, ec);
    if (ec || ::access(config_.cache_dir.c_str(), W_OK) != 0) config_.cache_dir.clear();
  }
}

Jit::~Jit() = default;

Jit& Jit::global() {
  // Never destroyed: kernels may still be referenced by static objects at exit.
  static Jit* jit = new Jit();
  return *jit;
}

std::string Jit::compiler_identity() const {
  static std::mutex mu;
  static std::map<std::string, std::string> cache;
  std::lock_guard<std::mutex> lock(mu);
  auto it = cache.find(config_.compiler);
  if (it != cache.end()) return it->second;
  auto argv = split_words(config_.compiler);
  if (argv.empty())
    throw CompileError("[jit] no C compiler found: set LUMINAL_CC or put cc, gcc or clang on PATH");
  argv.push_back("--version");
  ScratchDir scratch;
  fs::path log = scratch.path / "version.log";
  int rc = run_process(argv, log);
  std::string out = read_file(log);
  fs::remove(log);
  if (rc != 0)
    throw CompileError("[jit] C compiler '" + config_.compiler + "' does not run (" + join(argv) +
                       " exited " + std::to_string(rc) + "):\n" + out);
  std::string id = config_.compiler + "\n" + out;
  cache.emplace(config_.compiler, id);
  return id;
}

std::string Jit::cache_key(const std::string& src) const {
  std::string material = src;
  material += '\0' + compiler_identity();
  material += '\0' + join(config_.flags);
  material += '\0' + cpu_signature();
  return hash_hex(material);
}

fs::path Jit::cache_path(const std::string& c_source) const {
  const fs::path dir = config_.cache_dir.empty() ? fs::temp_directory_path() : config_.cache_dir;
  return dir / (cache_key(c_source) + ".so");
}

JitStats Jit::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

std::shared_ptr<const JitLibrary> Jit::compile(const std::string& c_source) {
  const std::string key = cache_key(c_source);
  std::shared_ptr<Entry> entry;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto& slot = entries_[key];
    if (!slot) slot = std::make_shared<Entry>();
    entry = slot;
  }
  std::lock_guard<std::mutex> build_lock(entry->mu);
  if (entry->lib) {
    std::lock_guard<std::mutex> lock(mu_);
    ++stats_.memory_hits;
    return entry->lib;
  }
  entry->lib = build(key, c_source);
  return entry->lib;
}

std::shared_ptr<const JitLibrary> Jit::build(const std::string& key, const std::string& src) {
  const bool disk = !config_.cache_dir.empty();
  if (disk && fs::exists(config_.cache_dir / (key + ".so"))) {
    const fs::path final_path = config_.cache_dir / (key + ".so");
    if (entry_is_valid(final_path, key)) {
      if (void* h = ::dlopen(final_path.c_str(), RTLD_NOW | RTLD_LOCAL)) {
        std::lock_guard<std::mutex> lock(mu_);
        ++stats_.disk_hits;
        return std::make_shared<JitLibrary>(h, final_path.string());
      }
    }
    {
      std::lock_guard<std::mutex> lock(mu_);
      ++stats_.corrupt_entries;
    }
    std::error_code ec;
    fs::remove(final_path, ec);
  }

  auto argv = split_words(config_.compiler);
  if (argv.empty())
    throw CompileError("[jit] no C compiler found: set LUMINAL_CC or put cc, gcc or clang on PATH");
  ScratchDir scratch;
  const fs::path dir = disk ? config_.cache_dir : scratch.path;
  const fs::path final_path = dir / (key + ".so");
  const std::string stem = key + "." + unique_suffix();
  const fs::path src_path = scratch.path / (stem + ".c");
  const fs::path tmp_so = dir / (stem + ".so.tmp");
  const fs::path log = scratch.path / (stem + ".log");
  {
    std::ofstream out(src_path, std::ios::binary);
    out << src;
    if (!out) throw CompileError("[jit] cannot write " + src_path.string());
  }
  argv.insert(argv.end(), config_.flags.begin(), config_.flags.end());
  argv.insert(argv.end(), {"-o", tmp_so.string(), src_path.string()});
  {
    std::lock_guard<std::mutex> lock(mu_);
    ++stats_.compiler_runs;
  }
  const int rc = run_process(argv, log);
  const std::string log_text = read_file(log);
  std::error_code ec;
  fs::remove(log, ec);
  if (rc != 0) {
    fs::remove(tmp_so, ec);
    throw CompileError("[jit] C compiler failed (exit " + std::to_string(rc) + "): " + join(argv) + "\n" +
                       log_text);
  }
  fs::remove(src_path, ec);
  append_trailer(tmp_so, key);
  fs::rename(tmp_so, final_path, ec);
  if (ec) throw CompileError("[jit] cannot rename " + tmp_so.string() + ": " + ec.message());
  void* h = ::dlopen(final_path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    const char* err = ::dlerror();
    throw CompileError("[jit] dlopen failed for " + final_path.string() + ": " +
                       (err ? err : "unknown error"));
  }
  // Without a disk cache the file goes with the scratch folder; the mapping stays valid.
  return std::make_shared<JitLibrary>(h, final_path.string());
}

}  // namespace luminal::cpu
