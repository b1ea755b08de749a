// Issue 13, items 1, 2, 4 and 5: saved programs (Callable::save / luminal::load).
//  1. destroying the last Callable of a loaded program does not crash (child process);
//  2. concurrent load() of one file and concurrent save() to one path;
//  4. the whole file is checksummed (every flipped bit is a RuntimeError) and the CPU
//     features the code needs are recorded and checked;
//  5. the loader writes nothing under a predictable name and follows no link.
#include <catch2/catch.hpp>

#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <thread>

#include "backends/cpu/cpu_executable.hpp"
#include "luminal/luminal.hpp"
#include "runtime/aot.hpp"
#include "runtime/executable.hpp"
#include "support/temp_dir.hpp"

namespace lm = luminal;
namespace fs = std::filesystem;

extern char** environ;

namespace {

// A fresh, empty folder per test case.
struct AotDir : testsupport::TempDir {
  AotDir() : testsupport::TempDir("rel-test") {}
};

std::string slurp(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}
void spit(const fs::path& p, const std::string& s) { std::ofstream(p, std::ios::binary | std::ios::trunc) << s; }

// exp(x) * 2 + 1 over [1024, 1024]: one parallel elementwise kernel.
lm::Callable parallel_program() {
  lm::Graph g;
  lm::Tensor x = g.input("x", {1024, 1024});
  g.output("y", lm::exp(x) * 2.0f + 1.0f);
  return lm::compile(g, lm::Target::cpu());
}

// A small program with a param, so that flipped bits can land in graph, plan, params or code.
lm::Callable small_program() {
  lm::Graph g;
  lm::Dim B = g.dim("B", 1, 16);
  lm::Tensor x = g.input("x", {B, 8});
  g.output("y", lm::softmax(lm::matmul(x, g.param("w", {8, 4})), -1));
  lm::Callable f = lm::compile(g, lm::Target::cpu());
  std::vector<float> w(32);
  for (size_t i = 0; i < w.size(); ++i) w[i] = 0.1f * static_cast<float>(i) - 1.0f;
  f.bind("w", lm::HostTensor::from(w, {8, 4}));
  return f;
}

lm::HostTensor small_input() {
  std::vector<float> x(24);
  for (size_t i = 0; i < x.size(); ++i) x[i] = 0.25f * static_cast<float>(i % 7) - 0.5f;
  return lm::HostTensor::from(x, {3, 8});
}

int run_child(const std::string& exe, const std::string& arg) {
  std::vector<std::string> env_s;
  for (char** e = environ; *e; ++e) env_s.emplace_back(*e);
  std::vector<char*> env;
  for (auto& s : env_s) env.push_back(s.data());
  env.push_back(nullptr);
  std::string a0 = exe, a1 = arg;
  char* argv[] = {a0.data(), a1.data(), nullptr};
  pid_t pid = 0;
  if (::posix_spawn(&pid, exe.c_str(), nullptr, nullptr, argv, env.data()) != 0) return -1;
  int status = 0;
  ::waitpid(pid, &status, 0);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

}  // namespace

TEST_CASE("destroying the last Callable of a loaded program is safe", "[reliability][aot]") {
  AotDir dir;
  const fs::path file = dir.path / "p.lmp";
  parallel_program().save(file.string());
  // A fresh process: this one already holds the worker runtime through its own JIT.
  CHECK(run_child(LUMINAL_AOT_UNLOAD_CHILD, file.string()) == 0);
}

TEST_CASE("concurrent load() of one file and save() to one path", "[reliability][aot]") {
  AotDir dir;
  const fs::path file = dir.path / "p.lmp";
  lm::Callable f = small_program();
  const auto want = f({{"x", small_input()}});
  f.save(file.string());

  constexpr int kThreads = 8;
  std::vector<std::thread> ts;
  std::vector<int> good(kThreads, 0);
  for (int t = 0; t < kThreads; ++t)
    ts.emplace_back([&, t] {
      for (int i = 0; i < 4; ++i) {
        lm::Callable h = lm::load(file.string());
        const auto got = h({{"x", small_input()}});
        if (got.at("y").to_f32() == want.at("y").to_f32()) ++good[t];
      }
    });
  for (auto& th : ts) th.join();
  for (int t = 0; t < kThreads; ++t) CHECK(good[t] == 4);

  // Concurrent saves of one Callable to one path: each completes, the result is whole.
  ts.clear();
  std::vector<std::string> errors(kThreads);
  for (int t = 0; t < kThreads; ++t)
    ts.emplace_back([&, t] {
      try {
        for (int i = 0; i < 3; ++i) f.save(file.string());
      } catch (const std::exception& e) {
        errors[t] = e.what();
      }
    });
  for (auto& th : ts) th.join();
  for (const auto& e : errors) CHECK(e.empty());
  CHECK(lm::load(file.string())({{"x", small_input()}}).at("y").to_f32() == want.at("y").to_f32());
  int files = 0;
  for (const auto& e : fs::directory_iterator(dir.path)) {
    ++files;
    CHECK(e.path().filename() == "p.lmp");  // no temp file left behind
  }
  CHECK(files == 1);
}

TEST_CASE("the loader writes no file under a predictable name and follows no link", "[reliability][aot]") {
  AotDir dir, tmp;
  const fs::path file = dir.path / "p.lmp";
  lm::Callable f = small_program();
  f.save(file.string());
  const auto* exe = dynamic_cast<const lm::cpu::CpuExecutable*>(f.state()->exe.get());
  REQUIRE(exe);
  // The names the loader used to write (TMPDIR/luminal-aot-<pid>-<hash>.so, truncated,
  // following links) planted as links to a file that must survive.
  const fs::path victim = dir.path / "victim.txt";
  spit(victim, "precious");
  const std::string planted = "luminal-aot-" + std::to_string(::getpid()) + "-" + exe->info().source_hash + ".so";
  fs::create_symlink(victim, tmp.path / planted);
  const char* old = std::getenv("TMPDIR");
  const std::string keep = old ? old : "";
  ::setenv("TMPDIR", tmp.path.c_str(), 1);
  lm::Callable h;
  try {
    h = lm::load(file.string());
  } catch (...) {
    old ? ::setenv("TMPDIR", keep.c_str(), 1) : ::unsetenv("TMPDIR");
    throw;
  }
  // While the program is loaded nothing new exists in the temp folder.
  int entries = 0;
  for (const auto& e : fs::directory_iterator(tmp.path)) {
    (void)e;
    ++entries;
  }
  old ? ::setenv("TMPDIR", keep.c_str(), 1) : ::unsetenv("TMPDIR");
  CHECK(entries == 1);  // only the planted link
  CHECK(slurp(victim) == "precious");
  const auto* loaded = dynamic_cast<const lm::cpu::CpuExecutable*>(h.state()->exe.get());
  REQUIRE(loaded);
  CHECK(loaded->library_path().rfind("/proc/self/fd/", 0) == 0);  // an anonymous memory file
  CHECK(h({{"x", small_input()}}).at("y").to_f32() == f({{"x", small_input()}}).at("y").to_f32());
}

TEST_CASE("every flipped bit of a saved program is a RuntimeError", "[reliability][aot]") {
  AotDir dir;
  const fs::path file = dir.path / "p.lmp";
  lm::Callable f = small_program();
  f.save(file.string());
  const std::string bytes = slurp(file);
  REQUIRE(bytes.size() > 1000);
  // Every byte of the first 2 KB (header, graph, plan, params) and 300 random bits of
  // the rest (the code); before the checksum, flips in the params gave wrong answers
  // silently and flips in the code SIGILL/SIGSEGV.
  std::vector<size_t> bits;
  for (size_t i = 0; i < 2048; ++i) bits.push_back(i * 8 + (i % 8));
  std::mt19937_64 rng(13);
  for (int i = 0; i < 300; ++i) bits.push_back(rng() % (bytes.size() * 8));
  const fs::path bad = dir.path / "bad.lmp";
  int refused = 0;
  for (size_t bit : bits) {
    std::string b = bytes;
    b[bit / 8] = static_cast<char>(b[bit / 8] ^ (1 << (bit % 8)));
    spit(bad, b);
    try {
      lm::load(bad.string());
    } catch (const lm::RuntimeError&) {
      ++refused;
    }
  }
  CHECK(refused == static_cast<int>(bits.size()));
  // Truncated anywhere: refused too.
  for (size_t n : {size_t{0}, size_t{10}, size_t{16}, bytes.size() / 2, bytes.size() - 1}) {
    spit(bad, bytes.substr(0, n));
    CHECK_THROWS_AS(lm::load(bad.string()), lm::RuntimeError);
  }
  CHECK_THROWS_WITH(lm::load(bad.string()), Catch::Contains("p.lmp") || Catch::Contains("bad.lmp"));
}

TEST_CASE("a program compiled for CPU features this CPU lacks is refused", "[reliability][aot]") {
  AotDir dir;
  const fs::path file = dir.path / "p.lmp";
  small_program().save(file.string());
  std::string bytes = slurp(file);
  const std::string features = lm::aot::required_cpu_features();
  REQUIRE(!features.empty());
  CHECK(lm::aot::missing_cpu_features(features).empty());
  CHECK(lm::aot::missing_cpu_features("sse2 lm_no_such_isa") == "lm_no_such_isa");
  // The recorded list, with its first feature renamed to one no CPU has (same length,
  // the checksum recomputed): a file saved on a CPU with more features.
  const size_t at = bytes.find(features);
  REQUIRE(at != std::string::npos);
  const size_t len = features.find(' ') == std::string::npos ? features.size() : features.find(' ');
  const std::string fake(len, 'z');
  bytes.replace(at, len, fake);
  spit(file, lm::aot::reseal(bytes));
  CHECK_THROWS_AS(lm::load(file.string()), lm::RuntimeError);
  CHECK_THROWS_WITH(lm::load(file.string()), Catch::Contains(fake) && Catch::Contains("lacks"));
}
