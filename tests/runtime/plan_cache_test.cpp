// The plan cache: a second compile of the same graph (same target and options) takes its
// kernel plan from memory, a fresh process from disk; any difference in the graph, the
// options or the target searches again; corrupt entries are rebuilt, never trusted.
#include <catch2/catch.hpp>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>

#include "luminal/luminal.hpp"
#include "runtime/plan_cache.hpp"

namespace lm = luminal;
namespace fs = std::filesystem;
using lm::detail::PlanCache;

namespace {

struct TempDir {
  fs::path path;
  TempDir() {
    path = fs::temp_directory_path() / ("lm-plan-cache-" + std::to_string(std::random_device{}()));
    fs::create_directories(path);
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
};

lm::Graph mlp(float bias, int64_t max_batch = 8) {
  lm::Graph g;
  lm::Dim B = g.dim("B", 1, max_batch);
  lm::Tensor x = g.input("x", {B, 16});
  g.output("y", lm::gelu(lm::linear(x, g.param("w", {24, 16}))) + bias);
  return g;
}

std::vector<float> run(lm::Callable fn) {
  std::vector<float> w(24 * 16), x(3 * 16);
  for (size_t i = 0; i < w.size(); ++i) w[i] = static_cast<float>(i % 7) * 0.1f - 0.3f;
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i % 5) * 0.2f - 0.4f;
  fn.bind("w", lm::HostTensor::from(w, {24, 16}));
  auto out = fn({{"x", lm::HostTensor::from(x, {3, 16})}});
  auto v = out.at("y").values<float>();
  return {v.begin(), v.end()};
}

std::vector<fs::path> plan_files(const fs::path& dir) {
  std::vector<fs::path> out;
  if (fs::exists(dir / "plans"))
    for (const auto& e : fs::directory_iterator(dir / "plans"))
      if (e.path().extension() == ".plan") out.push_back(e.path());
  return out;
}

}  // namespace

TEST_CASE("a graph compiled before skips the search, from memory and from disk", "[plan_cache]") {
  TempDir dir;
  lm::CompileOptions opt;
  opt.cache_dir = dir.path.string();
  opt.time_budget_seconds = 600;  // never the clock (a timed-out search is not cached)
  for (const lm::Target& target : {lm::Target::cpu(), lm::Target::reference()}) {
    INFO(target.to_string());
    lm::Callable first = lm::compile(mlp(0.5f), target, opt);
    CHECK_FALSE(first.report().plan_cached);
    const std::vector<float> want = run(first);

    const auto before = PlanCache::stats();
    lm::Callable second = lm::compile(mlp(0.5f), target, opt);
    CHECK(second.report().plan_cached);
    CHECK(PlanCache::stats().memory_hits == before.memory_hits + 1);
    CHECK(second.report().kernels == first.report().kernels);
    CHECK(second.report().egraph_nodes == first.report().egraph_nodes);
    CHECK(run(second) == want);

    PlanCache::clear_memory();  // as a new process would
    lm::Callable third = lm::compile(mlp(0.5f), target, opt);
    CHECK(third.report().plan_cached);
    CHECK(PlanCache::stats().disk_hits == before.disk_hits + 1);
    CHECK(run(third) == want);
    CHECK(third.report().to_string().find("plan from the plan cache") != std::string::npos);
  }
  CHECK(plan_files(dir.path).size() == 2);
}

TEST_CASE("a plan with an attention kernel comes back from disk", "[plan_cache]") {
  // Every kernel kind must survive the plan's saved form (an Attention spec was once read
  // back as corrupt, so every llama prefill searched again).
  TempDir dir;
  lm::CompileOptions opt;
  opt.cache_dir = dir.path.string();
  opt.time_budget_seconds = 600;
  auto graph = [] {
    lm::Graph g;
    lm::Tensor q = g.input("q", {2, 8, 16}), k = g.input("k", {2, 12, 16}), v = g.input("v", {2, 12, 8});
    g.output("y", lm::scaled_dot_product_attention(q, k, v, true));
    return g;
  };
  lm::Callable first = lm::compile(graph(), lm::Target::cpu(), opt);
  CHECK_FALSE(first.report().plan_cached);
  PlanCache::clear_memory();
  const auto before = PlanCache::stats();
  lm::Callable second = lm::compile(graph(), lm::Target::cpu(), opt);
  CHECK(second.report().plan_cached);
  CHECK(PlanCache::stats().corrupt_entries == before.corrupt_entries);
  CHECK(second.report().kernels == first.report().kernels);
}

TEST_CASE("any change of graph, dims, options or target searches again", "[plan_cache]") {
  TempDir dir;
  // The reference target: no C compiler runs, the search is what is cached.
  lm::CompileOptions opt;
  opt.cache_dir = dir.path.string();
  opt.time_budget_seconds = 600;  // never the clock (a timed-out search is not cached)
  // (The in-memory level is process-wide: constants no other test case uses.)
  (void)lm::compile(mlp(0.625f), lm::Target::reference(), opt);
  CHECK_FALSE(lm::compile(mlp(0.375f), lm::Target::reference(), opt).report().plan_cached);    // a constant
  CHECK_FALSE(lm::compile(mlp(0.625f, 9), lm::Target::reference(), opt).report().plan_cached);  // a dim range
  CHECK_FALSE(lm::compile(mlp(0.625f), lm::Target::cpu(), opt).report().plan_cached);  // the target
  lm::CompileOptions fm = opt;
  fm.fast_math = true;
  CHECK_FALSE(lm::compile(mlp(0.625f), lm::Target::reference(), fm).report().plan_cached);
  lm::CompileOptions small = opt;
  small.node_limit = 5000;
  CHECK_FALSE(lm::compile(mlp(0.625f), lm::Target::reference(), small).report().plan_cached);
  // A renamed input is a different program too (names are part of the call's contract).
  lm::Graph g;
  lm::Dim B = g.dim("B", 1, 8);
  g.output("y", lm::gelu(lm::linear(g.input("x2", {B, 16}), g.param("w", {24, 16}))) + 0.625f);
  CHECK_FALSE(lm::compile(g, lm::Target::reference(), opt).report().plan_cached);
  // Everything above is cached now.
  CHECK(lm::compile(mlp(0.625f, 9), lm::Target::reference(), opt).report().plan_cached);
  CHECK(lm::compile(mlp(0.625f), lm::Target::reference(), fm).report().plan_cached);
}

TEST_CASE("corrupt or truncated plan files are rebuilt; LUMINAL_PLAN_CACHE=0 disables the cache", "[plan_cache]") {
  TempDir dir;
  lm::CompileOptions opt;
  opt.cache_dir = dir.path.string();
  opt.time_budget_seconds = 600;  // never the clock (a timed-out search is not cached)
  const std::vector<float> want = run(lm::compile(mlp(0.75f), lm::Target::cpu(), opt));
  auto files = plan_files(dir.path);
  REQUIRE(files.size() == 1);
  const fs::path file = files[0];
  const auto size = fs::file_size(file);
  for (int damage = 0; damage < 3; ++damage) {
    INFO("damage " << damage);
    if (damage == 0) {  // a flipped byte in the middle
      std::fstream f(file, std::ios::in | std::ios::out | std::ios::binary);
      f.seekp(static_cast<std::streamoff>(size / 2));
      f.put('\x5a');
    } else if (damage == 1) {
      fs::resize_file(file, size / 3);
    } else {
      std::ofstream(file, std::ios::binary) << "not a plan";
    }
    PlanCache::clear_memory();
    const auto before = PlanCache::stats();
    lm::Callable fn = lm::compile(mlp(0.75f), lm::Target::cpu(), opt);
    CHECK_FALSE(fn.report().plan_cached);
    CHECK(PlanCache::stats().corrupt_entries == before.corrupt_entries + 1);
    CHECK(run(fn) == want);
    CHECK(fs::file_size(file) == size);  // rewritten whole
  }
  ::setenv("LUMINAL_PLAN_CACHE", "0", 1);
  CHECK_FALSE(lm::compile(mlp(0.75f), lm::Target::cpu(), opt).report().plan_cached);
  ::unsetenv("LUMINAL_PLAN_CACHE");
  CHECK(lm::compile(mlp(0.75f), lm::Target::cpu(), opt).report().plan_cached);
}

TEST_CASE("a search cut short by its time budget is not cached", "[plan_cache]") {
  TempDir dir;
  lm::CompileOptions opt;
  opt.cache_dir = dir.path.string();
  opt.time_budget_seconds = 1e-9;  // every optional phase runs out of time
  lm::Callable a = lm::compile(mlp(0.875f), lm::Target::reference(), opt);
  REQUIRE(a.report().stop_reason.find("time-limit") != std::string::npos);
  CHECK(a.report().stop_reason.find("time-limit (extraction)") != std::string::npos);  // no guided round ran
  lm::Callable b = lm::compile(mlp(0.875f), lm::Target::reference(), opt);
  CHECK_FALSE(b.report().plan_cached);
  CHECK(plan_files(dir.path).empty());
  CHECK(run(b) == run(a));
}
