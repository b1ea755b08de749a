#include "backends/cpu/jit.hpp"

#include <dlfcn.h>
#include <fcntl.h>
#include <link.h>
#include <spawn.h>
#include <sys/mman.h>
#include <sys/stat.h>
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
#include <set>
#include <sstream>

#include "backends/cpu/jit_cache_limit.hpp"
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

Trailer make_trailer(const std::string& payload, const std::string& key) {
  return Trailer{kMagic, payload.size(), checksum64(payload.data(), payload.size()),
                 checksum64(key.data(), key.size())};
}

// Writes all of `data` to `fd`; false (errno set) on any failure, short writes included.
bool write_all(int fd, const char* data, size_t n) {
  while (n > 0) {
    const ssize_t w = ::write(fd, data, n);
    if (w < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    if (w == 0) {
      errno = EIO;
      return false;
    }
    data += w;
    n -= static_cast<size_t>(w);
  }
  return true;
}

// Keeps every library a freshly opened object needs (its DT_NEEDED entries) loaded for
// the rest of the process. libgomp starts worker threads that stay parked inside it
// after a parallel region; if the generated object was the one that brought libgomp in,
// dlclose() of the object used to unload libgomp under those threads.
void pin_dependencies(void* handle) {
  struct link_map* map = nullptr;
  if (::dlinfo(handle, RTLD_DI_LINKMAP, &map) != 0 || !map || !map->l_ld) return;
  const char* strtab = nullptr;
  for (const ElfW(Dyn)* d = map->l_ld; d->d_tag != DT_NULL; ++d)
    if (d->d_tag == DT_STRTAB) {
      // glibc relocates these addresses in place; add the base where it did not.
      ElfW(Addr) a = d->d_un.d_ptr;
      if (a < map->l_addr) a += map->l_addr;
      strtab = reinterpret_cast<const char*>(a);
    }
  if (!strtab) return;
  for (const ElfW(Dyn)* d = map->l_ld; d->d_tag != DT_NULL; ++d) {
    if (d->d_tag != DT_NEEDED) continue;
    // Already loaded (it is a dependency): NOLOAD only takes a reference, NODELETE makes
    // it permanent. The extra reference is never dropped on purpose.
    (void)::dlopen(strtab + d->d_un.d_val, RTLD_NOW | RTLD_NOLOAD | RTLD_NODELETE);
  }
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

void warn_once(const std::string& message) {
  static std::mutex mu;
  static std::set<std::string> said;
  std::lock_guard<std::mutex> lock(mu);
  if (said.insert(message).second) std::fprintf(stderr, "luminal: %s\n", message.c_str());
}

std::string untrusted_folder_reason(const fs::path& dir) {
  struct stat st {};
  if (::stat(dir.c_str(), &st) != 0) return dir.string() + " cannot be read: " + std::strerror(errno);
  if (!S_ISDIR(st.st_mode)) return dir.string() + " is not a folder";
  if (st.st_uid != ::geteuid())
    return dir.string() + " is owned by uid " + std::to_string(st.st_uid) + ", not by this user (uid " +
           std::to_string(::geteuid()) + ")";
  if (st.st_mode & (S_IWGRP | S_IWOTH)) {
    char mode[8];
    std::snprintf(mode, sizeof mode, "%04o", static_cast<unsigned>(st.st_mode & 07777));
    return dir.string() + " is writable by " + ((st.st_mode & S_IWOTH) ? "others" : "its group") + " (mode " +
           mode + ")";
  }
  return "";
}

namespace {

// Why the cache entry `path` (lstat'ed, not followed) must not be loaded, "" when it may.
std::string untrusted_entry_reason(const fs::path& path) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0) return path.string() + " cannot be read: " + std::strerror(errno);
  if (!S_ISREG(st.st_mode)) return path.string() + " is not a regular file";
  if (st.st_uid != ::geteuid())
    return path.string() + " is owned by uid " + std::to_string(st.st_uid) + ", not by this user";
  if (st.st_mode & (S_IWGRP | S_IWOTH)) return path.string() + " is writable by group or others";
  return "";
}

// Removes what crashed processes left: temp entries in the cache folder and scratch
// folders of this user in the temp folder, each older than an hour (a compile takes
// seconds, so nothing that old is in use).
void sweep_leftovers(const fs::path& cache_dir) {
  const auto old = fs::file_time_type::clock::now() - std::chrono::hours(1);
  std::error_code ec;
  if (!cache_dir.empty()) {
    for (fs::directory_iterator it(cache_dir, ec), end; !ec && it != end; it.increment(ec)) {
      const std::string name = it->path().filename().string();
      if (name.size() > 4 && name.compare(name.size() - 4, 4, ".tmp") == 0 &&
          it->last_write_time(ec) < old && !ec)
        fs::remove(it->path(), ec);
    }
  }
  static std::once_flag once;
  std::call_once(once, [&] {
    std::error_code e;
    const fs::path tmp = fs::temp_directory_path(e);
    if (e) return;
    const std::string prefix = "luminal-jit-";
    for (fs::directory_iterator it(tmp, e), end; !e && it != end; it.increment(e)) {
      const std::string name = it->path().filename().string();
      if (name.size() != prefix.size() + 6 || name.rfind(prefix, 0) != 0) continue;  // mkdtemp's XXXXXX
      struct stat st {};
      if (::lstat(it->path().c_str(), &st) != 0 || !S_ISDIR(st.st_mode) || st.st_uid != ::geteuid()) continue;
      std::error_code e2;
      if (it->last_write_time(e2) < old && !e2) fs::remove_all(it->path(), e2);
    }
  });
}

}  // namespace

void write_cache_entry(const fs::path& path, const std::string& key, const std::string& payload) {
  const fs::path tmp = path.string() + "." + unique_suffix() + ".tmp";
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) throw CompileError("[jit] cannot write cache entry " + tmp.string() + ": " + std::strerror(errno));
  const Trailer t = make_trailer(payload, key);
  bool ok = write_all(fd, payload.data(), payload.size()) &&
            write_all(fd, reinterpret_cast<const char*>(&t), sizeof t);
  ok = ::close(fd) == 0 && ok;
  std::error_code ec;
  if (ok) fs::rename(tmp, path, ec);
  if (!ok || ec) {
    fs::remove(tmp, ec);
    throw CompileError("[jit] cannot write cache entry " + path.string());
  }
}

bool read_cache_entry(const fs::path& path, const std::string& key, std::string& payload) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0) return false;  // a miss
  if (const std::string why = untrusted_entry_reason(path); !why.empty()) {
    warn_once("refusing cache entry: " + why);
    std::error_code ec;
    fs::remove(path, ec);
    return false;
  }
  if (!entry_is_valid(path, key)) return false;
  payload = read_file(path);
  payload.resize(payload.size() - sizeof(Trailer));
  return true;
}

// ------------------------------------------------------------------ JitLibrary
std::shared_ptr<const JitLibrary> JitLibrary::open(const std::string& path, const std::string& what,
                                                   std::string bytes, int fd) {
  void* h = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    const char* err = ::dlerror();
    if (fd >= 0) ::close(fd);
    throw CompileError(what + ": " + (err ? err : "unknown dlopen error"));
  }
  pin_dependencies(h);
  auto lib = std::make_shared<JitLibrary>(h, path);
  lib->bytes_ = std::move(bytes);
  lib->fd_ = fd;
  return lib;
}

std::shared_ptr<const JitLibrary> JitLibrary::open_bytes(std::string bytes, const std::string& what) {
  // An anonymous memory file: no name anywhere, gone when the last reference is.
  const int fd = ::memfd_create("luminal-code", MFD_CLOEXEC);
  if (fd >= 0) {
    const std::string proc = "/proc/self/fd/" + std::to_string(fd);
    if (write_all(fd, bytes.data(), bytes.size()) && ::access(proc.c_str(), R_OK) == 0)
      return open(proc, what, {}, fd);  // bytes readable through the descriptor
    ::close(fd);
  }
  // No memfd or no /proc: a file created O_EXCL in a private folder, removed at once.
  ScratchDir dir;
  const fs::path file = dir.path / "code.so";
  const int f = ::open(file.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (f < 0) throw RuntimeError(what + ": cannot write " + file.string() + ": " + std::strerror(errno));
  const bool ok = write_all(f, bytes.data(), bytes.size());
  const int err = errno;
  ::close(f);
  if (!ok) throw RuntimeError(what + ": cannot write " + file.string() + ": " + std::strerror(err));
  // The folder's unique name makes the path unique while it is loaded.
  return open(file.string(), what, std::move(bytes));
}

JitLibrary::~JitLibrary() {
  if (handle_) ::dlclose(handle_);
  if (fd_ >= 0) ::close(fd_);
}

void* JitLibrary::symbol(const std::string& name) const {
  ::dlerror();
  void* p = ::dlsym(handle_, name.c_str());
  if (!p) throw CompileError("[jit] symbol '" + name + "' not found in " + path_);
  return p;
}

bool JitLibrary::has_symbol(const std::string& name) const {
  ::dlerror();
  return ::dlsym(handle_, name.c_str()) != nullptr;
}

std::string JitLibrary::bytes() const {
  if (!bytes_.empty()) return bytes_;
  std::ifstream in(path_, std::ios::binary);
  if (!in) throw RuntimeError("[jit] the code of this program is no longer readable (" + path_ + ")");
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// ------------------------------------------------------------------ config
std::vector<std::string> JitConfig::default_flags() {
  // -O3 -march=native: vectorize for the host ISA (the cache key carries the CPU
  //   features, so an entry never runs on a CPU that lacks them).
  // -mprefer-vector-width=512: GCC tunes Zen/Skylake for 256-bit vectors by default;
  //   our kernels are long, regular loops where 512-bit vectors win.
  // -fopenmp-simd: `omp simd` vectorization hints only. Threads come from Luminal's own
  //   pool through the kernel ABI; the code links no OpenMP runtime.
  // -ffp-contract=off: a*b+c is never silently fused, so generated code rounds like the
  //   reference interpreter; kernels that want FMA ask for it explicitly (the prelude,
  //   GEMM intrinsics).
  // -fno-math-errno -fno-trapping-math: sqrtf becomes one instruction and selects
  //   if-convert; results are unchanged (no -ffast-math: NaN/inf and the order of
  //   floating-point operations are kept).
  // -fwrapv: i32 arithmetic wraps around as in PyTorch and the interpreter; without it
  //   signed overflow is undefined and the compiler may rewrite (a + b) < a to b < 0.
  std::vector<std::string> f = {
      "-std=gnu11",         "-O3",    "-march=native", "-fopenmp-simd", "-ffp-contract=off", "-fno-math-errno",
      "-fno-trapping-math", "-fwrapv", "-fPIC",        "-shared",       "-w"};
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
  if (const char* max = std::getenv("LUMINAL_CACHE_MAX_BYTES"); max && *max)
    c.cache_max_bytes = std::strtoull(max, nullptr, 10);
  return c;
}

// ------------------------------------------------------------------ Jit
struct Jit::Entry {
  std::mutex mu;  // held while this key is being built, so it is built once
  // Not owned: the library is unloaded with its last user (a Callable, a benchmark), and
  // loaded again from the disk cache if it is compiled again.
  std::weak_ptr<const JitLibrary> lib;
};

Jit::Jit(JitConfig config) : config_(std::move(config)) {
  if (config_.cache_dir.empty()) {
    sweep_leftovers({});
    return;
  }
  // The folder is created private (0700); its parents as the umask says.
  std::error_code ec;
  if (config_.cache_dir.has_parent_path()) fs::create_directories(config_.cache_dir.parent_path(), ec);
  if (::mkdir(config_.cache_dir.c_str(), 0700) != 0 && errno != EEXIST) {
    warn_once("disk cache disabled: cannot create " + config_.cache_dir.string() + ": " + std::strerror(errno));
    config_.cache_dir.clear();
    sweep_leftovers({});
    return;
  }
  // Code in a folder that someone else can write into runs with our rights: refuse it.
  const std::string why = untrusted_folder_reason(config_.cache_dir);
  if (!why.empty()) {
    warn_once("disk cache disabled: " + why);
    config_.cache_dir.clear();
  } else if (::access(config_.cache_dir.c_str(), W_OK) != 0) {
    warn_once("disk cache disabled: " + config_.cache_dir.string() + " is not writable");
    config_.cache_dir.clear();
  }
  sweep_leftovers(config_.cache_dir);
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

std::string Jit::short_identity() const {
  std::string id;
  try {
    id = compiler_identity();
  } catch (const CompileError&) {
    return config_.compiler;
  }
  // compiler_identity() is "<command>\n<--version output>"
  const size_t nl = id.find('\n');
  std::string first = nl == std::string::npos ? id : id.substr(nl + 1);
  first = first.substr(0, first.find('\n'));
  // "gcc (Debian 12.2.0-14) 12.2.0" -> gcc 12.2.0; "Debian clang version 14.0.6" -> clang 14.0.6
  std::istringstream words(first);
  std::vector<std::string> w;
  for (std::string x; words >> x;) w.push_back(x);
  if (w.empty()) return config_.compiler;
  std::string name = w.front();
  for (size_t i = 1; i < w.size(); ++i)
    if (w[i] == "version") name = w[i - 1];
  return name + " " + w.back();
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

void Jit::count(uint64_t JitStats::*field) {
  std::lock_guard<std::mutex> lock(mu_);
  ++(stats_.*field);
}

std::shared_ptr<const JitLibrary> Jit::compile(const std::string& c_source,
                                               const std::vector<std::string>& required_symbols) {
  const std::string key = cache_key(c_source);
  std::shared_ptr<Entry> entry;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto& slot = entries_[key];
    if (!slot) slot = std::make_shared<Entry>();
    entry = slot;
  }
  std::lock_guard<std::mutex> build_lock(entry->mu);
  if (auto lib = entry->lib.lock()) {
    std::lock_guard<std::mutex> lock(mu_);
    ++stats_.memory_hits;
    return lib;
  }
  auto lib = build(key, c_source, required_symbols);
  entry->lib = lib;
  return lib;
}

// A trusted, intact disk entry with every required symbol, or null (the entry, if any,
// was refused, counted and removed).
std::shared_ptr<const JitLibrary> Jit::load_entry(const std::string& key, const std::vector<std::string>& required) {
  const fs::path path = config_.cache_dir / (key + ".so");
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0) return nullptr;  // a miss
  std::error_code ec;
  if (const std::string why = untrusted_entry_reason(path); !why.empty()) {
    // Planted or tampered with: never loaded (its constructors would run); our build
    // is renamed over it.
    warn_once("refusing cache entry: " + why);
    count(&JitStats::untrusted_entries);
    fs::remove(path, ec);
    return nullptr;
  }
  std::shared_ptr<const JitLibrary> lib;
  if (entry_is_valid(path, key)) {
    try {
      lib = JitLibrary::open(path.string(), "[jit] cache entry " + path.string());
    } catch (const CompileError&) {
      lib = nullptr;
    }
  }
  for (const auto& name : required)
    if (lib && !lib->has_symbol(name)) lib = nullptr;  // loads, but is not this program: evict
  if (!lib) {
    count(&JitStats::corrupt_entries);
    fs::remove(path, ec);
    return nullptr;
  }
  count(&JitStats::disk_hits);
  touch_entry(path);  // the size limit evicts least recently used entries first
  return lib;
}

// Copies a fresh build into the cache as <key>.so (+ trailer). False, having left
// nothing behind, when any step fails (full disk, quota, read-only folder...).
bool Jit::store_entry(const std::string& key, const std::string& so) {
  const fs::path final_path = config_.cache_dir / (key + ".so");
  const fs::path tmp = config_.cache_dir / (key + "." + unique_suffix() + ".so.tmp");
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) {
    warn_once("cannot write to the disk cache " + config_.cache_dir.string() + " (" + std::strerror(errno) +
              "): programs run uncached");
    return false;
  }
  const Trailer t = make_trailer(so, key);
  bool ok = write_all(fd, so.data(), so.size()) && write_all(fd, reinterpret_cast<const char*>(&t), sizeof t);
  int err = errno;
  if (::close(fd) != 0 && ok) {
    ok = false;
    err = errno;
  }
  std::error_code ec;
  if (ok) {
    fs::rename(tmp, final_path, ec);
    if (ec) {
      ok = false;
      err = ec.value();
    }
  }
  if (ok) evict_least_recent(config_.cache_dir, config_.cache_max_bytes, final_path);
  if (!ok) {
    fs::remove(tmp, ec);
    warn_once("cannot write to the disk cache " + config_.cache_dir.string() + " (" + std::strerror(err) +
              "): programs run uncached");
  }
  return ok;
}

std::shared_ptr<const JitLibrary> Jit::build(const std::string& key, const std::string& src,
                                             const std::vector<std::string>& required) {
  const bool disk = !config_.cache_dir.empty();
  if (disk)
    if (auto lib = load_entry(key, required)) return lib;

  auto argv = split_words(config_.compiler);
  if (argv.empty())
    throw CompileError("[jit] no C compiler found: set LUMINAL_CC or put cc, gcc or clang on PATH");
  // The compiler only ever writes into a private folder: a full or hostile cache folder
  // cannot fail the compile, and a crash leaves nothing in the cache.
  ScratchDir scratch;
  const fs::path src_path = scratch.path / (key + ".c");
  const fs::path so_path = scratch.path / (key + ".so");
  const fs::path log = scratch.path / (key + ".log");
  {
    std::ofstream out(src_path, std::ios::binary);
    out << src;
    if (!out) throw CompileError("[jit] cannot write " + src_path.string());
  }
  argv.insert(argv.end(), config_.flags.begin(), config_.flags.end());
  argv.insert(argv.end(), {"-o", so_path.string(), src_path.string()});
  count(&JitStats::compiler_runs);
  const int rc = run_process(argv, log);
  const std::string log_text = read_file(log);
  if (rc != 0)
    throw CompileError("[jit] C compiler failed (exit " + std::to_string(rc) + "): " + join(argv) + "\n" +
                       log_text);
  std::string so = read_file(so_path);
  if (so.empty()) throw CompileError("[jit] the C compiler wrote no output: " + join(argv) + "\n" + log_text);

  std::shared_ptr<const JitLibrary> lib;
  if (disk && store_entry(key, so)) {
    const fs::path final_path = config_.cache_dir / (key + ".so");
    lib = JitLibrary::open(final_path.string(), "[jit] dlopen failed for " + final_path.string());
  } else {
    if (disk) count(&JitStats::cache_write_failures);
    // Uncached: loaded from the scratch folder (its unique name plus the content key make
    // the path unique while loaded); the folder goes when this returns, the mapping stays.
    lib = JitLibrary::open(so_path.string(), "[jit] dlopen failed for " + so_path.string(), std::move(so));
  }
  for (const auto& name : required)
    if (!lib->has_symbol(name))
      throw CompileError("[jit] the compiled program lacks the symbol '" + name + "' (" + join(argv) + ")");
  return lib;
}

}  // namespace luminal::cpu
