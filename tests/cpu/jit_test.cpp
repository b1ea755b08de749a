// The system-compiler JIT: compile + call, memory and disk cache hits (no compiler run),
// corrupt entries rebuilt, compile errors carry the compiler log, LUMINAL_CC honoured.
#include <catch2/catch.hpp>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <thread>
#include <unistd.h>

#include "backends/cpu/jit.hpp"
#include "luminal/error.hpp"
#include "support/temp_dir.hpp"

namespace fs = std::filesystem;
using luminal::cpu::Jit;
using luminal::cpu::JitConfig;

namespace {

// A fresh, empty folder per test case.
struct TempDir : testsupport::TempDir {
  TempDir() : testsupport::TempDir("jit-test") {}
};

JitConfig config_in(const fs::path& dir) {
  JitConfig c = JitConfig::from_env();
  c.cache_dir = dir;
  return c;
}

const char* kAddSource = R"(
int lm_add(int a, int b) { return a + b; }
void lm_scale(float* restrict x, int n, float s) {
  #pragma omp simd
  for (int i = 0; i < n; ++i) x[i] *= s;
}
)";

}  // namespace

TEST_CASE("jit compiles a C kernel and calls it", "[cpu][jit]") {
  TempDir dir;
  Jit jit(config_in(dir.path));
  auto lib = jit.compile(kAddSource);
  auto add = lib->function<int (*)(int, int)>("lm_add");
  CHECK(add(40, 2) == 42);
  float x[5] = {1, 2, 3, 4, 5};
  lib->function<void (*)(float*, int, float)>("lm_scale")(x, 5, 0.5f);
  CHECK(x[4] == 2.5f);
  CHECK(jit.stats().compiler_runs == 1);
  CHECK_THROWS_AS(lib->symbol("no_such_symbol"), luminal::CompileError);
}

TEST_CASE("jit caches in memory and on disk", "[cpu][jit]") {
  TempDir dir;
  {
    Jit jit(config_in(dir.path));
    auto a = jit.compile(kAddSource);
    auto b = jit.compile(kAddSource);
    CHECK(a == b);
    CHECK(jit.stats().compiler_runs == 1);
    CHECK(jit.stats().memory_hits == 1);
    CHECK(fs::exists(jit.cache_path(kAddSource)));
  }
  // A new instance (empty memory cache) loads the disk entry without the compiler.
  Jit jit2(config_in(dir.path));
  auto lib = jit2.compile(kAddSource);
  CHECK(lib->function<int (*)(int, int)>("lm_add")(1, 2) == 3);
  CHECK(jit2.stats().compiler_runs == 0);
  CHECK(jit2.stats().disk_hits == 1);
  // No temp files are left behind.
  int files = 0;
  for (const auto& e : fs::directory_iterator(dir.path)) {
    ++files;
    CHECK(e.path().extension() == ".so");
  }
  CHECK(files == 1);
}

TEST_CASE("jit rebuilds a truncated or corrupt cache entry", "[cpu][jit]") {
  TempDir dir;
  fs::path entry;
  {
    Jit jit(config_in(dir.path));
    jit.compile(kAddSource);
    entry = jit.cache_path(kAddSource);
  }
  SECTION("truncated") { fs::resize_file(entry, fs::file_size(entry) / 2); }
  SECTION("one byte flipped") {
    std::fstream f(entry, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(100);
    f.put('\x5a');
  }
  SECTION("garbage") { std::ofstream(entry, std::ios::binary | std::ios::trunc) << "not an ELF file"; }
  Jit jit(config_in(dir.path));
  auto lib = jit.compile(kAddSource);
  CHECK(lib->function<int (*)(int, int)>("lm_add")(2, 2) == 4);
  CHECK(jit.stats().corrupt_entries == 1);
  CHECK(jit.stats().compiler_runs == 1);
  // The rebuilt entry is valid again.
  Jit jit3(config_in(dir.path));
  jit3.compile(kAddSource);
  CHECK(jit3.stats().disk_hits == 1);
}

TEST_CASE("jit compile errors carry the compiler log", "[cpu][jit]") {
  TempDir dir;
  Jit jit(config_in(dir.path));
  try {
    jit.compile("int broken(void) { return undeclared_name_xyz; }\n");
    FAIL("expected CompileError");
  } catch (const luminal::CompileError& e) {
    std::string msg = e.what();
    CHECK(msg.find("undeclared_name_xyz") != std::string::npos);
    CHECK(msg.find("C compiler failed") != std::string::npos);
  }
  // The failure is not cached: a good source still compiles afterwards.
  CHECK(jit.compile(kAddSource)->function<int (*)(int, int)>("lm_add")(3, 4) == 7);
}

TEST_CASE("jit honours LUMINAL_CC", "[cpu][jit]") {
  TempDir dir;
  // A wrapper compiler that records each call, then runs the real compiler.
  fs::path log = dir.path / "calls.log";
  fs::path wrapper = dir.path / "mycc.sh";
  {
    std::ofstream w(wrapper);
    w << "#!/bin/sh\necho \"$@\" >> '" << log.string() << "'\nexec cc \"$@\"\n";
  }
  fs::permissions(wrapper, fs::perms::owner_all);
  ::setenv("LUMINAL_CC", wrapper.c_str(), 1);
  JitConfig cfg = JitConfig::from_env();
  ::unsetenv("LUMINAL_CC");
  CHECK(cfg.compiler == wrapper.string());
  cfg.cache_dir = dir.path / "cache";
  Jit jit(cfg);
  CHECK(jit.compile(kAddSource)->function<int (*)(int, int)>("lm_add")(5, 5) == 10);
  std::ifstream in(log);
  std::string all((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  CHECK(all.find("--version") != std::string::npos);  // identity probe
  CHECK(all.find("-shared") != std::string::npos);    // the compile itself
  // A compiler that cannot be started is a CompileError, not a crash.
  JitConfig bad = cfg;
  bad.compiler = "/nonexistent/luminal-cc";
  Jit jit_bad(bad);
  CHECK_THROWS_AS(jit_bad.compile(kAddSource), luminal::CompileError);
}

TEST_CASE("jit is thread-safe: concurrent compiles of one source run the compiler once", "[cpu][jit]") {
  TempDir dir;
  Jit jit(config_in(dir.path));
  std::vector<std::thread> threads;
  std::vector<int> results(4, 0);
  for (int t = 0; t < 4; ++t)
    threads.emplace_back(
        [&, t] { results[t] = jit.compile(kAddSource)->function<int (*)(int, int)>("lm_add")(t, 1); });
  for (auto& th : threads) th.join();
  for (int t = 0; t < 4; ++t) CHECK(results[t] == t + 1);
  CHECK(jit.stats().compiler_runs == 1);
  // A library is unloaded when its last user drops it: a later thread may load it again
  // from the disk cache instead of finding it in memory.
  CHECK(jit.stats().memory_hits + jit.stats().disk_hits == 3);
}

TEST_CASE("jit without a disk cache compiles in a private folder it removes", "[cpu][jit]") {
  // Counted in a temp folder of our own: other processes (tests run side by side, other
  // programs using Luminal) make and remove luminal-jit-* folders in the shared one.
  std::string own = (fs::temp_directory_path() / "luminal-jit-test-tmp-XXXXXX").string();
  REQUIRE(::mkdtemp(own.data()) != nullptr);
  const char* old_tmpdir = std::getenv("TMPDIR");
  const std::string saved = old_tmpdir ? old_tmpdir : "";
  ::setenv("TMPDIR", own.c_str(), 1);
  struct Restore {
    bool had;
    std::string value, own;
    ~Restore() {
      if (had) ::setenv("TMPDIR", value.c_str(), 1);
      else ::unsetenv("TMPDIR");
      std::error_code ec;
      fs::remove_all(own, ec);
    }
  } restore{old_tmpdir != nullptr, saved, own};
  auto count_scratch = [] {
    int n = 0;
    for (const auto& e : fs::directory_iterator(fs::temp_directory_path()))
      if (e.path().filename().string().rfind("luminal-jit-", 0) == 0 &&
          e.path().filename().string().rfind("luminal-jit-test-", 0) != 0)
        ++n;
    return n;
  };
  JitConfig cfg = JitConfig::from_env();
  cfg.cache_dir.clear();
  // The first Jit of a process sweeps scratch folders that crashed runs left (older than
  // an hour): let that happen before counting.
  { Jit sweeper(cfg); }
  const int before = count_scratch();
  {
    Jit jit(cfg);
    auto lib = jit.compile(kAddSource);
    CHECK(lib->function<int (*)(int, int)>("lm_add")(20, 22) == 42);
    CHECK(jit.compile(kAddSource) == lib);  // the memory cache still works
    CHECK(jit.stats().compiler_runs == 1);
    CHECK(count_scratch() == before);  // nothing left while the library is loaded
  }
  CHECK(count_scratch() == before);
}

TEST_CASE("jit disk cache: a size limit, least recently used entries evicted first", "[cpu][jit]") {
  TempDir dir;
  auto source = [](int i) { return "int lm_f" + std::to_string(i) + "(void) { return " + std::to_string(i) + "; }\n"; };
  JitConfig c = config_in(dir.path);
  uintmax_t one = 0;
  {
    Jit jit(c);
    jit.compile(source(0));
    one = fs::file_size(jit.cache_path(source(0)));
  }
  // Room for three entries and a half.
  c.cache_max_bytes = one * 7 / 2;
  auto cached = [&](int i) { return fs::exists(Jit(c).cache_path(source(i))); };
  {
    Jit jit(c);
    jit.compile(source(1));
    jit.compile(source(2));
  }
  // Entry 0 is used again (a disk hit in a new instance), so 1 is now the oldest.
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  {
    Jit jit(c);
    jit.compile(source(0));
    CHECK(jit.stats().disk_hits == 1);
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  Jit(c).compile(source(3));  // four entries: one must go
  CHECK(cached(0));
  CHECK_FALSE(cached(1));
  CHECK(cached(2));
  CHECK(cached(3));
  uintmax_t total = 0;
  for (const auto& e : fs::directory_iterator(dir.path)) total += fs::file_size(e.path());
  CHECK(total <= c.cache_max_bytes);
}
